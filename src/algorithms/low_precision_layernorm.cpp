#include "composer/algorithms/low_precision_layernorm.h"

#include "algorithms/detail/common.h"
#include "composer/core/fields.h"
#include "composer/core/state.h"
#include "composer/models/composer_model.h"
#include "composer/utils/compat.h"

#include <ATen/ATen.h>

#include <iostream>
#include <stdexcept>
#include <typeinfo>

namespace composer {
namespace nn {
at::Tensor LPLayerNorm::forward(const at::Tensor& x) {
  const c10::DeviceType device = x.device().type();
  if (!compat::autocast_enabled(device)) return LayerNorm::forward(x);
  const at::ScalarType dtype = compat::autocast_dtype(device);
  const at::Tensor low_x = x.to(dtype), low_weight = weight.to(dtype), low_bias = bias.to(dtype);
  compat::AutocastOff off(device);
  return at::layer_norm(low_x, {dim}, low_weight, low_bias, eps);
}

}  // namespace nn

namespace functional {

std::vector<Replacement> apply_low_precision_layernorm(torch::nn::Module& model, Precision precision,
                                                       torch::optim::Optimizer* optimizer) {
  return algorithms::detail::low_precision_surgery(
      model, precision, optimizer, "LowPrecisionLayerNorm", "LayerNorm",
      policy_for<nn::LayerNorm>([](nn::LayerNorm& norm, int64_t) -> std::shared_ptr<nn::Layer> {
        if (typeid(norm) != typeid(nn::LayerNorm)) return nullptr;  // already low precision, or a user's subclass
        auto low = std::make_shared<nn::LPLayerNorm>(norm.dim, norm.eps);
        at::NoGradGuard no_grad;
        low->weight.copy_(norm.weight);
        low->bias.copy_(norm.bias);
        return low;
      }));
}

}  // namespace functional

namespace algorithms {

void LowPrecisionLayerNormOptions::validate() const { detail::require_load_event("LowPrecisionLayerNorm", apply_at_); }

LowPrecisionLayerNorm::LowPrecisionLayerNorm(LowPrecisionLayerNormOptions options) : options_(options) {
  options_.validate();
}

bool LowPrecisionLayerNorm::match(Event event, const State&) { return event == options_.apply_at(); }

std::optional<int> LowPrecisionLayerNorm::apply(Event, State& state, Logger&) {
  if (state.model) functional::apply_low_precision_layernorm(*state.model, state.precision, state.optimizer.get());
  return std::nullopt;
}

std::string LowPrecisionLayerNorm::repr() const { return options_repr("LowPrecisionLayerNorm", options_); }

}  // namespace algorithms
}  // namespace composer
