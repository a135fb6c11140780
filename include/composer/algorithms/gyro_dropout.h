// GyroDropout: dropout that trains a fixed set of preselected subnetworks (Composer's GyroDropout and
// GyroDropoutLayer).
#pragma once

#include "composer/algorithms/module_surgery.h"
#include "composer/core/algorithm.h"
#include "composer/core/fields.h"
#include "composer/nn/layer.h"

#include <torch/arg.h>

#include <vector>

namespace composer {
namespace nn {

/// For [N, F] inputs in training: at its first step draws sigma masks over the F features (keep probability
/// 1 - p); every iter_num steps picks tau of them (with replacement), and sample i of a batch gets mask
/// i / (N / tau); the output is x * mask / (1 - p). iter_num = int(total_steps / sigma) * tau, at least 1. Evaluation
/// passes x through. Throws std::invalid_argument for inputs that are not 2-D or whose batch tau does not divide.
class GyroDropoutLayer : public Layer {
 public:
  GyroDropoutLayer(int64_t total_steps, double p, int64_t sigma, int64_t tau);
  at::Tensor forward(const at::Tensor& x) override;
  int64_t total_steps, sigma, tau;
  double p;
  int64_t training_step = 0;
  int64_t iter_num = 0;
  at::Tensor preselect_masks, selected_masks;
};

}  // namespace nn

namespace functional {

/// Replaces every nn::Dropout of `model` by an nn::GyroDropoutLayer for a run of `total_steps` optimizer steps
/// (Composer passes iters_per_epoch * max_epochs). Returns the replacements (none: a note on stderr).
std::vector<Replacement> apply_gyro_dropout(torch::nn::Module& model, int64_t total_steps, double p = 0.5,
                                            int64_t sigma = 256, int64_t tau = 16);

}  // namespace functional

namespace algorithms {

struct GyroDropoutOptions {
  /// Drop probability, in [0, 1).
  TORCH_ARG(double, p) = 0.5;
  /// Subnetworks preselected, >= 1.
  TORCH_ARG(int64_t, sigma) = 256;
  /// Subnetworks trained concurrently (per batch), in [1, sigma].
  TORCH_ARG(int64_t, tau) = 16;

 public:
  void validate() const;
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("p", self.p_, "drop probability, in [0, 1)");
    visit("sigma", self.sigma_, "subnetworks preselected, >= 1");
    visit("tau", self.tau_, "subnetworks per batch, in [1, sigma]; divides the batch size");
  }
};

/// FIT_START: functional::apply_gyro_dropout with the run's length in batches (max_duration converted with the
/// dataloader's length). Required on load.
class GyroDropout : public Algorithm {
 public:
  explicit GyroDropout(GyroDropoutOptions options = GyroDropoutOptions());
  bool match(Event event, const State& state) override;
  std::optional<int> apply(Event event, State& state, Logger& logger) override;
  bool required_on_load() const override { return true; }
  std::string repr() const override;
  const GyroDropoutOptions& options() const { return options_; }

 private:
  GyroDropoutOptions options_;
};

}  // namespace algorithms
}  // namespace composer
