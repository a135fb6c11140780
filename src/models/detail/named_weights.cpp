#include "models/detail/named_weights.h"

#include <stdexcept>
#include <utility>

namespace composer::models::detail {

NamedWeights::NamedWeights(torch::nn::Module& module, std::string source)
    : params_(module.named_parameters()), source_(std::move(source)) {}

at::Tensor& NamedWeights::checked(const std::string& name, at::IntArrayRef shape, const std::string& shown) {
  const std::string what = source_ + ": tensor '" + (shown.empty() ? name : shown) + "'";
  at::Tensor* target = params_.find(name);
  if (!target) throw std::runtime_error(what + " is not a parameter of this model");
  if (shape != target->sizes()) {
    throw std::runtime_error(what + " has shape " + c10::str(shape) + ", the model's " + name + " is " +
                             c10::str(target->sizes()));
  }
  return *target;
}

void NamedWeights::fill(const std::string& name, const at::Tensor& value, const std::string& shown) {
  // Under nn::DeferredInit the copy is recorded (holding the value) and made when the model is materialized.
  nn::initialize(
      checked(name, value.sizes(), shown), [value](at::Tensor& t) { t.copy_(value); }, false);
  filled_.insert(name);
}

void NamedWeights::fill_from(const std::string& name, at::IntArrayRef shape, nn::PartReader read,
                             const std::string& shown) {
  nn::initialize_from(checked(name, shape, shown), std::move(read));
  filled_.insert(name);
}

void NamedWeights::require_all(const std::function<bool(const std::string&)>& needed) const {
  for (const auto& p : params_) {
    if ((!needed || needed(p.key())) && !filled_.count(p.key()))
      throw std::runtime_error(source_ + " lacks tensor '" + p.key() + "'");
  }
}

void convert_loaded(torch::nn::Module& model, at::ScalarType dtype, const std::string& loader) {
  if (dtype == at::kFloat) return;
  if (nn::has_deferred_parameters(model)) {
    throw std::invalid_argument(loader + ": a model built under nn::DeferredInit loads in float32 only (got " +
                                std::string(c10::toString(dtype)) + "); convert it once it is materialized");
  }
  model.to(dtype);
}

}  // namespace composer::models::detail
