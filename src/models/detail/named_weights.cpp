#include "models/detail/named_weights.h"

#include <stdexcept>
#include <utility>

namespace composer::models::detail {

NamedWeights::NamedWeights(torch::nn::Module& module, std::string source)
    : params_(module.named_parameters()), source_(std::move(source)) {}

void NamedWeights::fill(const std::string& name, const at::Tensor& value, const std::string& shown) {
  const std::string what = source_ + ": tensor '" + (shown.empty() ? name : shown) + "'";
  at::Tensor* target = params_.find(name);
  if (!target) throw std::runtime_error(what + " is not a parameter of this model");
  if (value.sizes() != target->sizes()) {
    throw std::runtime_error(what + " has shape " + c10::str(value.sizes()) + ", the model's " + name + " is " +
                             c10::str(target->sizes()));
  }
  at::NoGradGuard no_grad;
  target->copy_(value);
  filled_.insert(name);
}

void NamedWeights::require_all(const std::function<bool(const std::string&)>& needed) const {
  for (const auto& p : params_) {
    if ((!needed || needed(p.key())) && !filled_.count(p.key()))
      throw std::runtime_error(source_ + " lacks tensor '" + p.key() + "'");
  }
}

}  // namespace composer::models::detail
