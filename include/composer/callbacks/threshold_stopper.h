// ThresholdStopper: ends training once a metric crosses a threshold (Composer's ThresholdStopper).
#pragma once

#include "composer/core/callback.h"
#include "composer/core/fields.h"

#include <torch/arg.h>

#include <functional>
#include <optional>
#include <string>

namespace composer {

/// Watches `monitor` (a metric name such as "Accuracy") of the evaluator labelled `dataloader_label` at EVAL_END,
/// or of the train metrics ("train") at EPOCH_END (and BATCH_END when stop_on_batch). `comp(value, threshold)` true
/// stops training; by default "greater or equal", or "less or equal" when the name contains loss, error or
/// perplexity.
struct ThresholdStopperOptions {
  using Compare = std::function<bool(double value, double threshold)>;
  TORCH_ARG(Required<std::string>, monitor);
  TORCH_ARG(Required<std::string>, dataloader_label);
  TORCH_ARG(Required<double>, threshold);
  /// Not a field (a function): null picks the default comparison above.
  TORCH_ARG(Compare, comp) = nullptr;
  TORCH_ARG(bool, stop_on_batch) = false;

 public:
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("monitor", self.monitor_, "required: the metric to watch, such as 'Accuracy'");
    visit("dataloader_label", self.dataloader_label_, "required: the evaluator label, or 'train'");
    visit("threshold", self.threshold_, "required: the value that stops training");
    visit("stop_on_batch", self.stop_on_batch_, "also check train metrics after every batch");
  }
};

class ThresholdStopper : public Callback {
 public:
  using Compare = ThresholdStopperOptions::Compare;
  /// Throws std::invalid_argument naming an unset monitor, dataloader_label or threshold.
  explicit ThresholdStopper(ThresholdStopperOptions options);
  ThresholdStopper(std::string monitor, std::string dataloader_label, double threshold, Compare comp = nullptr);
  void eval_end(State& state, Logger& logger) override;
  void epoch_end(State& state, Logger& logger) override;
  void batch_end(State& state, Logger& logger) override;

 private:
  void check(State& state, const std::map<std::string, double>& values);
  std::string monitor_, label_;
  double threshold_;
  Compare comp_;
  bool stop_on_batch_;
};

}  // namespace composer
