// NoOpModel: replaces the model with a one-parameter stand-in, to measure what the Trainer costs around a model
// (Composer's NoOpModel and NoOpModelClass).
#pragma once

#include "composer/core/algorithm.h"
#include "composer/models/composer_model.h"

#include <memory>

namespace composer {
namespace algorithms {

/// The stand-in model: one parameter `weights` = [1.5] on the replaced model's device; for a batch (input, target)
/// the outputs are target * weights, the loss their mean squared error against the float target, evaluation
/// returns the target itself, and the evaluation metric is BinaryAccuracy (no training metric: it would run at
/// every microbatch, as in Composer, and refuse the targets of a multi-class data set).
class NoOpModelClass : public ComposerModel {
 public:
  /// `original_model` gives the device; it needs at least one parameter.
  explicit NoOpModelClass(const torch::nn::Module& original_model);
  at::Tensor forward(const Batch& batch) override;
  at::Tensor loss(const at::Tensor& outputs, const Batch& batch) override;
  at::Tensor eval_forward(const Batch& batch, const at::Tensor& outputs = {}) override;
  MetricMap get_metrics(bool is_train) override;

  at::Tensor weights;
};

struct NoOpModelOptions {
  template <class Self, class Visit>
  static void for_each_field(Self&, Visit&&) {}
};

/// INIT: state.model becomes a NoOpModelClass and the optimizer trains its parameter instead of the old ones.
/// Required on load: a checkpoint of such a run re-creates it before its weights load.
class NoOpModel : public Algorithm {
 public:
  explicit NoOpModel(NoOpModelOptions = {}) {}
  bool match(Event event, const State& state) override;
  std::optional<int> apply(Event event, State& state, Logger& logger) override;
  bool required_on_load() const override { return true; }
};

}  // namespace algorithms
}  // namespace composer
