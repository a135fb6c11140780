#include "composer/algorithms/weight_standardization.h"

#include "algorithms/detail/common.h"
#include "composer/core/fields.h"
#include "composer/core/state.h"
#include "composer/models/composer_model.h"

#include <torch/torch.h>

#include <iostream>

namespace composer {
namespace nn {

StandardizedConv2d::StandardizedConv2d(const Conv2d& c) : Conv2d(c.options()) {
  torch::NoGradGuard no_grad;
  weight.copy_(c.weight);
  if (c.bias.defined()) bias.copy_(c.bias);
}

at::Tensor StandardizedConv2d::forward(const at::Tensor& x) {
  return at::conv2d(x, functional::standardize_weights(weight), bias, {stride, stride}, {padding, padding}, {1, 1},
                    groups);
}

}  // namespace nn

namespace functional {

at::Tensor standardize_weights(const at::Tensor& weight) {
  std::vector<int64_t> dims;
  for (int64_t d = 1; d < weight.dim(); ++d) dims.push_back(d);
  const auto [var, mean] = at::var_mean(weight, dims, /*unbiased=*/false, /*keepdim=*/true);
  return (weight - mean) / at::sqrt(var + 1e-10);
}

std::vector<Replacement> apply_weight_standardization(torch::nn::Module& model, int64_t n_last_layers_ignore,
                                                      torch::optim::Optimizer* optimizer) {
  if (n_last_layers_ignore < 0) {
    algorithms::detail::bad_option("apply_weight_standardization", "n_last_layers_ignore", ">= 0",
                                   static_cast<double>(n_last_layers_ignore));
  }
  const auto plain_conv = [](const torch::nn::Module& m) {
    return dynamic_cast<const nn::Conv2d*>(&m) && !dynamic_cast<const nn::StandardizedConv2d*>(&m);
  };
  const int64_t to_change = count_module_instances(model, plain_conv) - n_last_layers_ignore;
  ReplacementPolicy policy;
  policy.kind = "Conv2d";
  policy.matches = plain_conv;
  policy.replace = [to_change](torch::nn::Module& m, int64_t index) -> std::shared_ptr<nn::Layer> {
    if (index >= to_change) return nullptr;
    return std::make_shared<nn::StandardizedConv2d>(dynamic_cast<nn::Conv2d&>(m));
  };
  SurgeryOptions so;
  so.optimizer = optimizer;
  return replace_module_classes(model, {policy}, so);
}

}  // namespace functional

namespace algorithms {

void WeightStandardizationOptions::validate() const {
  if (n_last_layers_ignore_ < 0) {
    detail::bad_option("WeightStandardization", "n_last_layers_ignore", ">= 0",
                       static_cast<double>(n_last_layers_ignore_));
  }
}

WeightStandardization::WeightStandardization(WeightStandardizationOptions options) : options_(options) {
  options_.validate();
}

bool WeightStandardization::match(Event event, const State&) { return event == Event::INIT; }

std::optional<int> WeightStandardization::apply(Event, State& state, Logger&) {
  if (functional::apply_weight_standardization(*state.model, options_.n_last_layers_ignore(), state.optimizer.get())
          .empty()) {
    std::cerr << "composer: WeightStandardization found no Conv2d to standardize\n";
  }
  return std::nullopt;
}

std::string WeightStandardization::repr() const { return options_repr("WeightStandardization", options_); }

}  // namespace algorithms
}  // namespace composer
