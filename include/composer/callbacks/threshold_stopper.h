// ThresholdStopper: ends training once a metric crosses a threshold (Composer's ThresholdStopper).
#pragma once

#include "composer/core/callback.h"

#include <functional>
#include <string>

namespace composer {

/// Watches `monitor` (a metric name such as "Accuracy") of the evaluator labelled `dataloader_label` at EVAL_END,
/// or of the train metrics ("train") at EPOCH_END (and BATCH_END when stop_on_batch). `comp(value, threshold)` true
/// stops training; by default "greater or equal", or "less or equal" when the name contains loss, error or
/// perplexity.
class ThresholdStopper : public Callback {
 public:
  using Compare = std::function<bool(double value, double threshold)>;
  ThresholdStopper(std::string monitor, std::string dataloader_label, double threshold, Compare comp = nullptr,
                   bool stop_on_batch = false);
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
