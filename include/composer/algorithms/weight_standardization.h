// WeightStandardization: convolutions use weights standardized to zero mean and unit variance per output channel
// (Composer's WeightStandardization, Qiao et al. 2019).
#pragma once

#include "composer/algorithms/module_surgery.h"
#include "composer/core/algorithm.h"
#include "composer/nn/layers.h"

#include <torch/arg.h>

namespace composer {
namespace nn {

/// A Conv2d whose forward() uses (W - mean) / sqrt(var + 1e-10), mean and biased variance over dims 1.. of W. The
/// stored parameter stays the raw "weight" (Composer's parametrization stores it as
/// parametrizations.weight.original; see docs/differences.md).
class StandardizedConv2d : public Conv2d {
 public:
  explicit StandardizedConv2d(const Conv2d& original);
  at::Tensor forward(const at::Tensor& x) override;
};

}  // namespace nn

namespace functional {

/// (W - mean) / sqrt(var + 1e-10) over dims 1.. (biased variance).
at::Tensor standardize_weights(const at::Tensor& weight);
/// Makes every Conv2d of `model` a StandardizedConv2d except the last `n_last_layers_ignore` (depth-first order).
std::vector<Replacement> apply_weight_standardization(torch::nn::Module& model, int64_t n_last_layers_ignore = 0,
                                                      torch::optim::Optimizer* optimizer = nullptr);

}  // namespace functional

namespace algorithms {

struct WeightStandardizationOptions {
  /// The last n convolutions (depth-first order) keep plain weights.
  TORCH_ARG(int64_t, n_last_layers_ignore) = 0;

 public:
  void validate() const;
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("n_last_layers_ignore", self.n_last_layers_ignore_, "the last n convolutions keep plain weights");
  }
};

/// INIT: functional::apply_weight_standardization.
class WeightStandardization : public Algorithm {
 public:
  explicit WeightStandardization(WeightStandardizationOptions options = {});
  bool match(Event event, const State& state) override;
  std::optional<int> apply(Event event, State& state, Logger& logger) override;
  bool required_on_load() const override { return true; }
  std::string repr() const override;

 private:
  WeightStandardizationOptions options_;
};

}  // namespace algorithms
}  // namespace composer
