#include "composer/algorithms/low_precision_layernorm.h"

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
namespace {

// `with torch.autocast(device, enabled=False)`.
class AutocastOff {
 public:
  explicit AutocastOff(c10::DeviceType device) : device_(device) { compat::set_autocast_enabled(device_, false); }
  ~AutocastOff() { compat::set_autocast_enabled(device_, true); }
  AutocastOff(const AutocastOff&) = delete;
  AutocastOff& operator=(const AutocastOff&) = delete;

 private:
  c10::DeviceType device_;
};

}  // namespace

at::Tensor LPLayerNorm::forward(const at::Tensor& x) {
  const c10::DeviceType device = x.device().type();
  if (!compat::autocast_enabled(device)) return LayerNorm::forward(x);
  const at::ScalarType dtype = compat::autocast_dtype(device);
  const at::Tensor low_x = x.to(dtype), low_weight = weight.to(dtype), low_bias = bias.to(dtype);
  AutocastOff off(device);
  return at::layer_norm(low_x, {dim}, low_weight, low_bias, eps);
}

}  // namespace nn

namespace functional {

std::vector<Replacement> apply_low_precision_layernorm(torch::nn::Module& model, Precision precision,
                                                       torch::optim::Optimizer* optimizer) {
  if (precision != Precision::AMP_FP16 && precision != Precision::AMP_BF16) {
    std::cerr << "composer: LowPrecisionLayerNorm has no effect at precision " << to_string(precision)
              << " (it applies to amp_fp16 and amp_bf16)\n";
    return {};
  }
  std::vector<ReplacementPolicy> policies{
      policy_for<nn::LayerNorm>([](nn::LayerNorm& norm, int64_t) -> std::shared_ptr<nn::Layer> {
        if (typeid(norm) != typeid(nn::LayerNorm)) return nullptr;  // already low precision, or a user's subclass
        auto low = std::make_shared<nn::LPLayerNorm>(norm.dim, norm.eps);
        at::NoGradGuard no_grad;
        low->weight.copy_(norm.weight);
        low->bias.copy_(norm.bias);
        return low;
      })};
  SurgeryOptions options;
  options.optimizer = optimizer;
  auto done = replace_module_classes(model, policies, options);
  if (done.empty()) std::cerr << "composer: LowPrecisionLayerNorm found no LayerNorm to replace\n";
  return done;
}

}  // namespace functional

namespace algorithms {

void LowPrecisionLayerNormOptions::validate() const {
  if (apply_at_ != Event::INIT && apply_at_ != Event::BEFORE_LOAD && apply_at_ != Event::AFTER_LOAD) {
    throw std::invalid_argument(std::string("LowPrecisionLayerNorm.apply_at must be 'init', 'before_load' or "
                                            "'after_load', got '") +
                                event_value(apply_at_) + "'");
  }
}

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
