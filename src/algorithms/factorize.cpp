#include "composer/algorithms/factorize.h"

#include "algorithms/detail/common.h"
#include "composer/core/state.h"
#include "composer/models/composer_model.h"

#include <torch/torch.h>

#include <cmath>
#include <iostream>

namespace composer {
namespace nn {

FactorizedConv2d::FactorizedConv2d(const Conv2d& c, int64_t r) : latent_channels(r) {
  if (c.groups != 1) throw std::invalid_argument("FactorizedConv2d: grouped convolutions (groups=" + std::to_string(c.groups) + ") cannot be factorized");
  add("conv0", std::make_shared<Conv2d>(c.in_channels, r, c.kernel_size, c.stride, c.padding, false));
  add("conv1", std::make_shared<Conv2d>(r, c.out_channels, 1, 1, 0, c.bias.defined()));
}

at::Tensor FactorizedConv2d::forward(const at::Tensor& x) { return child("conv1").forward(child("conv0").forward(x)); }

FactorizedLinear::FactorizedLinear(const Linear& l, int64_t r) : latent_features(r) {
  add("module0", std::make_shared<Linear>(l.in_features, r, false));
  add("module1", std::make_shared<Linear>(r, l.out_features, l.bias.defined()));
}

at::Tensor FactorizedLinear::forward(const at::Tensor& x) { return child("module1").forward(child("module0").forward(x)); }

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

std::string Factorize::repr() const {
  return detail::Repr("Factorize")
      .add("factorize_convs", options_.factorize_convs())
      .add("factorize_linears", options_.factorize_linears())
      .add("min_channels", options_.min_channels())
      .add("latent_channels", options_.latent_channels())
      .add("min_features", options_.min_features())
      .add("latent_features", options_.latent_features())
      .str();
}

}  // namespace algorithms
}  // namespace composer
