#include "composer/algorithms/factorize.h"

#include "algorithms/detail/common.h"
#include "composer/core/fields.h"
#include "composer/core/state.h"
#include "composer/models/composer_model.h"

#include <torch/torch.h>

#include <cmath>
#include <iostream>

namespace composer {
namespace nn {

FactorizedConv2d::FactorizedConv2d(const Conv2d& c, int64_t r) : latent_channels(r) {
  if (c.groups != 1)
    throw std::invalid_argument("FactorizedConv2d: grouped convolutions (groups=" + std::to_string(c.groups) +
                                ") cannot be factorized");
  add("conv0", std::make_shared<Conv2d>(
                   Conv2dOptions(c.in_channels, r, c.kernel_size).stride(c.stride).padding(c.padding).bias(false)));
  add("conv1", std::make_shared<Conv2d>(Conv2dOptions(r, c.out_channels, 1).bias(c.bias.defined())));
}

at::Tensor FactorizedConv2d::forward(const at::Tensor& x) { return child("conv1").forward(child("conv0").forward(x)); }

FactorizedLinear::FactorizedLinear(const Linear& l, int64_t r) : latent_features(r) {
  add("module0", std::make_shared<Linear>(LinearOptions(l.in_features, r).bias(false)));
  add("module1", std::make_shared<Linear>(LinearOptions(r, l.out_features).bias(l.bias.defined())));
}

at::Tensor FactorizedLinear::forward(const at::Tensor& x) {
  return child("module1").forward(child("module0").forward(x));
}

namespace {

// Reduced-rank regression: the rank-r W' minimising ||X W'^T - X W^T|| is W' = V_r V_r^T W, with V_r the top r right
// singular vectors of X W^T. Returns (V_r^T W  [r, in], V_r  [out, r]).
std::pair<at::Tensor, at::Tensor> best_factors(const at::Tensor& x, const at::Tensor& w, int64_t rank) {
  torch::NoGradGuard no_grad;
  const at::Tensor y = x.to(at::kDouble).matmul(w.to(at::kDouble).t());
  const at::Tensor v = std::get<2>(at::linalg_svd(y, /*full_matrices=*/false)).t().narrow(1, 0, rank);  // [out, r]
  return {v.t().matmul(w.to(at::kDouble)).to(w.scalar_type()), v.to(w.scalar_type())};
}

void check_rank(const char* what, int64_t rank, int64_t current) {
  if (rank < 1 || rank > current) {
    throw std::invalid_argument(std::string(what) + "::set_rank: rank must be in [1, " + std::to_string(current) +
                                "], got " + std::to_string(rank));
  }
}

// Puts `fresh` in place of child `name`; the optimizer swaps the parameters.
void swap_child(Composite& parent, const std::string& name, const std::shared_ptr<Layer>& fresh,
                torch::optim::Optimizer* optimizer) {
  const auto old = parent.child_ptr(name);
  if (optimizer) update_params_in_optimizer(old->parameters(), fresh->parameters(), *optimizer);
  parent.replace(name, fresh);
}

}  // namespace

void FactorizedConv2d::set_rank(const at::Tensor& input, int64_t rank, torch::optim::Optimizer* optimizer) {
  check_rank("FactorizedConv2d", rank, latent_channels);
  if (rank == latent_channels) return;
  auto& c0 = dynamic_cast<Conv2d&>(child("conv0"));
  auto& c1 = dynamic_cast<Conv2d&>(child("conv1"));
  const int64_t k = c0.kernel_size;
  // Patches of the input as rows: [N * L, in * k * k]; the current map is W = W1 W0 over them.
  const at::Tensor patches =
      at::im2col(input.detach(), {k, k}, {1, 1}, {c0.padding, c0.padding}, {c0.stride, c0.stride})
          .transpose(1, 2)
          .reshape({-1, c0.in_channels * k * k});
  const at::Tensor w = c1.weight.detach().flatten(1).matmul(c0.weight.detach().flatten(1));  // [out, in*k*k]
  const auto [w0, w1] = best_factors(patches, w, rank);
  auto n0 = std::make_shared<Conv2d>(
      Conv2dOptions(c0.in_channels, rank, k).stride(c0.stride).padding(c0.padding).bias(false));
  auto n1 = std::make_shared<Conv2d>(Conv2dOptions(rank, c1.out_channels, 1).bias(c1.bias.defined()));
  n0->to(c0.weight.device(), c0.weight.scalar_type());
  n1->to(c1.weight.device(), c1.weight.scalar_type());
  {
    torch::NoGradGuard no_grad;
    n0->weight.copy_(w0.view({rank, c0.in_channels, k, k}));
    n1->weight.copy_(w1.view({c1.out_channels, rank, 1, 1}));
    if (c1.bias.defined()) n1->bias.copy_(c1.bias);
  }
  swap_child(*this, "conv0", n0, optimizer);
  swap_child(*this, "conv1", n1, optimizer);
  latent_channels = rank;
}

void FactorizedLinear::set_rank(const at::Tensor& input, int64_t rank, torch::optim::Optimizer* optimizer) {
  check_rank("FactorizedLinear", rank, latent_features);
  if (rank == latent_features) return;
  auto& m0 = dynamic_cast<Linear&>(child("module0"));
  auto& m1 = dynamic_cast<Linear&>(child("module1"));
  const at::Tensor w = m1.weight.detach().matmul(m0.weight.detach());  // [out, in]
  const auto [w0, w1] = best_factors(input.detach().reshape({-1, m0.in_features}), w, rank);
  auto n0 = std::make_shared<Linear>(LinearOptions(m0.in_features, rank).bias(false));
  auto n1 = std::make_shared<Linear>(LinearOptions(rank, m1.out_features).bias(m1.bias.defined()));
  n0->to(m0.weight.device(), m0.weight.scalar_type());
  n1->to(m1.weight.device(), m1.weight.scalar_type());
  {
    torch::NoGradGuard no_grad;
    n0->weight.copy_(w0);
    n1->weight.copy_(w1);
    if (m1.bias.defined()) n1->bias.copy_(m1.bias);
  }
  swap_child(*this, "module0", n0, optimizer);
  swap_child(*this, "module1", n1, optimizer);
  latent_features = rank;
}

}  // namespace nn

namespace functional {

int64_t factorized_rank(double latent, int64_t in, int64_t out) {
  if (latent >= 1) return static_cast<int64_t>(latent);
  return std::max<int64_t>(1, static_cast<int64_t>(latent * static_cast<double>(std::min(in, out))));
}

int64_t max_rank_with_speedup(int64_t in, int64_t out, int64_t kernel_area) {
  const double fan_in = static_cast<double>(in * kernel_area);
  const double breakeven = fan_in * static_cast<double>(out) / (fan_in + static_cast<double>(out));
  return static_cast<int64_t>(std::ceil(breakeven - 1));
}

void FactorizeOptions::validate() const {
  using algorithms::detail::bad_option;
  if (min_channels_ < 1) bad_option("Factorize", "min_channels", ">= 1", static_cast<double>(min_channels_));
  if (min_features_ < 1) bad_option("Factorize", "min_features", ">= 1", static_cast<double>(min_features_));
  if (!(latent_channels_ > 0)) bad_option("Factorize", "latent_channels", "> 0", latent_channels_);
  if (!(latent_features_ > 0)) bad_option("Factorize", "latent_features", "> 0", latent_features_);
}

std::vector<Replacement> apply_factorization(torch::nn::Module& model, const FactorizeOptions& options,
                                             torch::optim::Optimizer* optimizer) {
  options.validate();
  std::vector<ReplacementPolicy> policies;
  if (options.factorize_convs()) {
    policies.push_back(policy_for<nn::Conv2d>([&](nn::Conv2d& c, int64_t) -> std::shared_ptr<nn::Layer> {
      if (c.groups != 1 || std::min(c.in_channels, c.out_channels) < options.min_channels()) return nullptr;
      const int64_t r = factorized_rank(options.latent_channels(), c.in_channels, c.out_channels);
      if (r > max_rank_with_speedup(c.in_channels, c.out_channels, c.kernel_size * c.kernel_size)) return nullptr;
      return std::make_shared<nn::FactorizedConv2d>(c, r);
    }));
  }
  if (options.factorize_linears()) {
    policies.push_back(policy_for<nn::Linear>([&](nn::Linear& l, int64_t) -> std::shared_ptr<nn::Layer> {
      if (std::min(l.in_features, l.out_features) < options.min_features()) return nullptr;
      const int64_t r = factorized_rank(options.latent_features(), l.in_features, l.out_features);
      if (r > max_rank_with_speedup(l.in_features, l.out_features)) return nullptr;
      return std::make_shared<nn::FactorizedLinear>(l, r);
    }));
  }
  SurgeryOptions so;
  so.optimizer = optimizer;
  return replace_module_classes(model, policies, so);
}

}  // namespace functional

namespace algorithms {

Factorize::Factorize(FactorizeOptions options) : options_(std::move(options)) { options_.validate(); }

bool Factorize::match(Event event, const State&) { return event == Event::INIT; }

std::optional<int> Factorize::apply(Event, State& state, Logger&) {
  if (functional::apply_factorization(*state.model, options_, state.optimizer.get()).empty()) {
    std::cerr << "composer: Factorize found no Conv2d or Linear wide enough to factorize\n";
  }
  return std::nullopt;
}

std::string Factorize::repr() const { return options_repr("Factorize", options_); }

}  // namespace algorithms
}  // namespace composer
