// RuntimeEstimator: the estimated training time left (Composer's RuntimeEstimator).
#pragma once

#include "composer/core/callback.h"

#include <torch/arg.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace composer {

struct RuntimeEstimatorOptions {
  TORCH_ARG(int64_t, skip_batches) = 1;
  TORCH_ARG(std::string, time_unit) = "hours";

 public:
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("skip_batches", self.skip_batches_, "batches left out of the estimate at the start (warm-up)");
    visit("time_unit", self.time_unit_, "unit of time/remaining_estimate: seconds, minutes, hours or days");
  }
};

/// Logs time/remaining_estimate (in time_unit) at every BATCH_END after the first skip_batches: the training time per
/// unit of elapsed duration since then times the duration left, plus the remaining evaluations of each evaluator at
/// their average cost (the first left out once there are more). With max_duration in epochs, the elapsed duration
/// counts batches (batches per epoch from the epochs done, or the loader's length in the first). Logs the
/// hyperparameter time/remaining_estimate_unit at INIT.
class RuntimeEstimator : public Callback {
 public:
  /// Throws std::invalid_argument naming a negative skip_batches or an unknown time_unit.
  explicit RuntimeEstimator(RuntimeEstimatorOptions options = {});
  void init(State& state, Logger& logger) override;
  void batch_start(State& state, Logger& logger) override;
  void batch_end(State& state, Logger& logger) override;
  void eval_end(State& state, Logger& logger) override;

 private:
  using Clock = std::chrono::steady_clock;
  std::optional<double> elapsed_duration(const State& state) const;
  std::string time_unit_;
  double divider_;
  int64_t batches_left_to_skip_;
  bool enabled_ = true;
  std::optional<Clock::time_point> start_time_;
  double start_dur_ = 0.0;
  std::optional<int64_t> train_dataloader_len_;
  double total_eval_seconds_ = 0.0;
  std::map<std::string, std::vector<double>> eval_seconds_per_label_;
  std::map<std::string, double> eval_frequency_per_label_;
};

}  // namespace composer
