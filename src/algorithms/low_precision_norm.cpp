// LowPrecisionLayerNorm and LowPrecisionGroupNorm: their norms (LPLayerNorm, LPGroupNorm), their surgeries, and
// the algorithm they share.
#include "composer/algorithms/low_precision_norm.h"

#include "algorithms/detail/common.h"
#include "composer/algorithms/low_precision_groupnorm.h"
#include "composer/algorithms/low_precision_layernorm.h"
#include "composer/core/state.h"
#include "composer/models/composer_model.h"
#include "composer/utils/compat.h"

#include <ATen/ATen.h>

#include <typeinfo>

namespace composer {
namespace nn {
namespace {

// `norm(x, weight, bias)` with all three in the autocast dtype and autocast off (autocast would run it in float32).
template <class Norm>
at::Tensor in_autocast_dtype(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, Norm norm) {
  const c10::DeviceType device = x.device().type();
  const at::ScalarType dtype = compat::autocast_dtype(device);
  const auto low = [dtype](const at::Tensor& t) { return t.defined() ? t.to(dtype) : t; };
  const at::Tensor low_x = low(x), low_weight = low(weight), low_bias = low(bias);
  compat::AutocastOff off(device);
  return norm(low_x, low_weight, low_bias);
}

}  // namespace

at::Tensor LPRMSNorm::forward(const at::Tensor& x) {
  if (!compat::autocast_enabled(x.device().type())) return RMSNorm::forward(x);
  const at::Tensor undefined;
  return in_autocast_dtype(x, weight, undefined,
                           [this](const at::Tensor& v, const at::Tensor& w, const at::Tensor&) {
                             return v * at::rsqrt(v.pow(2).mean(-1, /*keepdim=*/true) + eps) * w;
                           })
      .to(x.scalar_type());
}

at::Tensor LPLayerNorm::forward(const at::Tensor& x) {
  if (!compat::autocast_enabled(x.device().type())) return LayerNorm::forward(x);
  return in_autocast_dtype(x, weight, bias, [this](const at::Tensor& v, const at::Tensor& w, const at::Tensor& b) {
    return at::layer_norm(v, {dim}, w, b, eps);
  });
}

at::Tensor LPGroupNorm::forward(const at::Tensor& x) {
  if (!compat::autocast_enabled(x.device().type())) return GroupNorm::forward(x);
  return in_autocast_dtype(x, weight, bias, [this](const at::Tensor& v, const at::Tensor& w, const at::Tensor& b) {
    return at::group_norm(v, num_groups, w, b, eps);
  });
}

}  // namespace nn

namespace functional {

std::vector<Replacement> apply_low_precision_layernorm(torch::nn::Module& model, Precision precision,
                                                       torch::optim::Optimizer* optimizer) {
  auto layer_norm = policy_for<nn::LayerNorm>([](nn::LayerNorm& norm, int64_t) -> std::shared_ptr<nn::Layer> {
    if (typeid(norm) != typeid(nn::LayerNorm)) return nullptr;  // already low precision, or a user's subclass
    auto low = std::make_shared<nn::LPLayerNorm>(norm.dim, norm.eps);
    at::NoGradGuard no_grad;
    low->weight.copy_(norm.weight);
    low->bias.copy_(norm.bias);
    return low;
  });
  auto rms_norm = policy_for<nn::RMSNorm>([](nn::RMSNorm& norm, int64_t) -> std::shared_ptr<nn::Layer> {
    if (typeid(norm) != typeid(nn::RMSNorm)) return nullptr;
    auto low = std::make_shared<nn::LPRMSNorm>(norm.dim, norm.eps);
    at::NoGradGuard no_grad;
    low->weight.copy_(norm.weight);
    return low;
  });
  return algorithms::detail::low_precision_surgery(model, precision, optimizer, "LowPrecisionLayerNorm",
                                                   "LayerNorm or RMSNorm", {layer_norm, rms_norm});
}

std::vector<Replacement> apply_low_precision_groupnorm(torch::nn::Module& model, Precision precision,
                                                       torch::optim::Optimizer* optimizer) {
  return algorithms::detail::low_precision_surgery(
      model, precision, optimizer, "LowPrecisionGroupNorm", "GroupNorm",
      {policy_for<nn::GroupNorm>([](nn::GroupNorm& norm, int64_t) -> std::shared_ptr<nn::Layer> {
        if (typeid(norm) != typeid(nn::GroupNorm)) return nullptr;  // already low precision, or a user's subclass
        auto low = std::make_shared<nn::LPGroupNorm>(norm.num_groups, norm.num_channels, norm.eps, norm.affine);
        if (norm.affine) {
          at::NoGradGuard no_grad;
          low->weight.copy_(norm.weight);
          low->bias.copy_(norm.bias);
        }
        return low;
      })});
}

}  // namespace functional

namespace algorithms {

LowPrecisionNorm::LowPrecisionNorm(std::string name, Surgery surgery, LowPrecisionNormOptions options)
    : name_(std::move(name)), surgery_(surgery), options_(options) {
  detail::require_load_event(name_, options_.apply_at());
}

bool LowPrecisionNorm::match(Event event, const State&) { return event == options_.apply_at(); }

std::optional<int> LowPrecisionNorm::apply(Event, State& state, Logger&) {
  if (state.model) surgery_(*state.model, state.precision, state.optimizer.get());
  return std::nullopt;
}

std::string LowPrecisionNorm::repr() const { return options_repr(name_, options_); }

LowPrecisionLayerNorm::LowPrecisionLayerNorm(LowPrecisionNormOptions options)
    : LowPrecisionNorm("LowPrecisionLayerNorm", functional::apply_low_precision_layernorm, options) {}

LowPrecisionGroupNorm::LowPrecisionGroupNorm(LowPrecisionNormOptions options)
    : LowPrecisionNorm("LowPrecisionGroupNorm", functional::apply_low_precision_groupnorm, options) {}

}  // namespace algorithms
}  // namespace composer
