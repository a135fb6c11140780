#include "composer/algorithms/low_precision_groupnorm.h"

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

at::Tensor LPGroupNorm::forward(const at::Tensor& x) {
  const c10::DeviceType device = x.device().type();
  if (!compat::autocast_enabled(device)) return GroupNorm::forward(x);
  const at::ScalarType dtype = compat::autocast_dtype(device);
  const at::Tensor low_x = x.to(dtype);
  const at::Tensor low_weight = weight.defined() ? weight.to(dtype) : weight;
  const at::Tensor low_bias = bias.defined() ? bias.to(dtype) : bias;
  compat::AutocastOff off(device);
  return at::group_norm(low_x, num_groups, low_weight, low_bias, eps);
}

}  // namespace nn

namespace functional {

std::vector<Replacement> apply_low_precision_groupnorm(torch::nn::Module& model, Precision precision,
                                                       torch::optim::Optimizer* optimizer) {
  return algorithms::detail::low_precision_surgery(
      model, precision, optimizer, "LowPrecisionGroupNorm", "GroupNorm",
      policy_for<nn::GroupNorm>([](nn::GroupNorm& norm, int64_t) -> std::shared_ptr<nn::Layer> {
        if (typeid(norm) != typeid(nn::GroupNorm)) return nullptr;  // already low precision, or a user's subclass
        auto low = std::make_shared<nn::LPGroupNorm>(norm.num_groups, norm.num_channels, norm.eps, norm.affine);
        if (norm.affine) {
          at::NoGradGuard no_grad;
          low->weight.copy_(norm.weight);
          low->bias.copy_(norm.bias);
        }
        return low;
      }));
}

}  // namespace functional

namespace algorithms {

void LowPrecisionGroupNormOptions::validate() const { detail::require_load_event("LowPrecisionGroupNorm", apply_at_); }

LowPrecisionGroupNorm::LowPrecisionGroupNorm(LowPrecisionGroupNormOptions options) : options_(options) {
  options_.validate();
}

bool LowPrecisionGroupNorm::match(Event event, const State&) { return event == options_.apply_at(); }

std::optional<int> LowPrecisionGroupNorm::apply(Event, State& state, Logger&) {
  if (state.model) functional::apply_low_precision_groupnorm(*state.model, state.precision, state.optimizer.get());
  return std::nullopt;
}

std::string LowPrecisionGroupNorm::repr() const { return options_repr("LowPrecisionGroupNorm", options_); }

}  // namespace algorithms
}  // namespace composer
