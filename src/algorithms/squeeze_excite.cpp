#include "composer/algorithms/squeeze_excite.h"

#include "algorithms/detail/common.h"
#include "composer/core/fields.h"
#include "composer/core/state.h"
#include "composer/models/composer_model.h"

#include <torch/torch.h>

#include <iostream>

namespace composer {
namespace nn {

SqueezeExcite2d::SqueezeExcite2d(int64_t c, double latent)
    : latent_channels(static_cast<int64_t>(latent >= 1 ? latent : latent * static_cast<double>(c))) {
  if (latent_channels < 1) {
    throw std::invalid_argument("SqueezeExcite2d: latent_channels " + std::to_string(latent) + " of " +
                                std::to_string(c) + " channels leaves no hidden unit");
  }
  add("pool_and_mlp",
      std::make_shared<Sequential>(std::vector<std::shared_ptr<Layer>>{
          std::make_shared<GlobalAvgPool>(), std::make_shared<Flatten>(),
          std::make_shared<Linear>(LinearOptions(c, latent_channels).bias(false)), std::make_shared<ReLU>(),
          std::make_shared<Linear>(LinearOptions(latent_channels, c).bias(false)), std::make_shared<Sigmoid>()}));
}

at::Tensor SqueezeExcite2d::forward(const at::Tensor& x) {
  const at::Tensor coeffs = child("pool_and_mlp").forward(x);
  return x * coeffs.view({x.size(0), x.size(1), 1, 1});
}

SqueezeExciteConv2d::SqueezeExciteConv2d(std::shared_ptr<Conv2d> conv, double latent) {
  const int64_t out = conv->out_channels;
  add("conv", std::move(conv));
  add("se", std::make_shared<SqueezeExcite2d>(out, latent));
}

at::Tensor SqueezeExciteConv2d::forward(const at::Tensor& x) { return child("se").forward(child("conv").forward(x)); }

}  // namespace nn

namespace functional {

void SqueezeExciteOptions::validate() const {
  algorithms::detail::require_range("SqueezeExcite", "latent_channels", latent_channels_, 0.0, INFINITY, true);
  if (min_channels_ < 1)
    algorithms::detail::bad_option("SqueezeExcite", "min_channels", ">= 1", static_cast<double>(min_channels_));
}

std::vector<Replacement> apply_squeeze_excite(torch::nn::Module& model, const SqueezeExciteOptions& options,
                                              torch::optim::Optimizer* optimizer) {
  options.validate();
  std::vector<ReplacementPolicy> policies{
      policy_for<nn::Conv2d>([&](nn::Conv2d& conv, int64_t) -> std::shared_ptr<nn::Layer> {
        if (std::min(conv.in_channels, conv.out_channels) < options.min_channels()) return nullptr;
        return std::make_shared<nn::SqueezeExciteConv2d>(std::dynamic_pointer_cast<nn::Conv2d>(conv.shared_from_this()),
                                                         options.latent_channels());
      })};
  SurgeryOptions so;
  so.optimizer = optimizer;
  return replace_module_classes(model, policies, so);
}

}  // namespace functional

namespace algorithms {

SqueezeExcite::SqueezeExcite(SqueezeExciteOptions options) : options_(std::move(options)) { options_.validate(); }

bool SqueezeExcite::match(Event event, const State&) { return event == Event::INIT; }

std::optional<int> SqueezeExcite::apply(Event, State& state, Logger&) {
  if (functional::apply_squeeze_excite(*state.model, options_, state.optimizer.get()).empty()) {
    std::cerr << "composer: SqueezeExcite found no Conv2d with at least " << options_.min_channels() << " channels\n";
  }
  return std::nullopt;
}

std::string SqueezeExcite::repr() const { return options_repr("SqueezeExcite", options_); }

}  // namespace algorithms
}  // namespace composer
