#include "composer/callbacks/runtime_estimator.h"

#include "callbacks/detail/time_divider.h"
#include "composer/core/logger.h"
#include "composer/core/state.h"

#include <iostream>
#include <numeric>
#include <stdexcept>

namespace composer {

RuntimeEstimator::RuntimeEstimator(RuntimeEstimatorOptions options)
    : time_unit_(options.time_unit()),
      divider_(callbacks::detail::seconds_per(options.time_unit(), "RuntimeEstimator")),
      batches_left_to_skip_(options.skip_batches()) {
  if (batches_left_to_skip_ < 0) {
    throw std::invalid_argument("RuntimeEstimator.skip_batches must be >= 0, got " +
                                std::to_string(batches_left_to_skip_));
  }
}

std::optional<double> RuntimeEstimator::elapsed_duration(const State& state) const {
  if (!state.max_duration) return std::nullopt;
  const Timestamp& ts = state.timestamp;
  if (state.max_duration->unit() == TimeUnit::EPOCH) {
    const double max_epochs = state.max_duration->value();
    if (ts.epoch >= 1) {
      const double batches_per_epoch = double(ts.batch - ts.batch_in_epoch) / double(ts.epoch);
      return double(ts.batch) / (max_epochs * batches_per_epoch);
    }
    if (train_dataloader_len_) return double(ts.batch) / (max_epochs * double(*train_dataloader_len_));
  }
  return state.get_elapsed_duration();
}

void RuntimeEstimator::init(State&, Logger& logger) {
  logger.log_hyperparameters({{"time/remaining_estimate_unit", time_unit_}});
}

void RuntimeEstimator::batch_start(State& state, Logger&) {
  if (!enabled_ || start_time_ || batches_left_to_skip_ > 0) return;
  start_time_ = Clock::now();
  const auto dur = elapsed_duration(state);
  if (!dur) {
    std::cerr << "composer: warning: RuntimeEstimator: max_duration is not set, so no remaining time is estimated\n";
    enabled_ = false;
    return;
  }
  start_dur_ = *dur;
  if (state.dataloader_len) train_dataloader_len_ = *state.dataloader_len;
}

void RuntimeEstimator::batch_end(State& state, Logger& logger) {
  if (!enabled_) return;
  if (batches_left_to_skip_ > 0) {
    --batches_left_to_skip_;
    return;
  }
  const auto elapsed = elapsed_duration(state);
  if (!start_time_ || !elapsed || *elapsed <= start_dur_) return;
  const double seconds =
      std::chrono::duration<double>(Clock::now() - *start_time_).count() - total_eval_seconds_;  // training only
  const double rate = seconds / (*elapsed - start_dur_);
  double remaining = rate * (1.0 - *elapsed);
  for (const auto& [label, evals] : eval_seconds_per_label_) {
    const double frequency = eval_frequency_per_label_.at(label);
    if (frequency <= 0.0) continue;  // evaluated before any training progress: no rate yet
    const double finished = double(evals.size());
    const double average =
        evals.size() > 1 ? std::accumulate(evals.begin() + 1, evals.end(), 0.0) / (finished - 1) : evals.front();
    const double total_evals = 1.0 / frequency * (1.0 - start_dur_);
    remaining += average * (total_evals - finished);
  }
  logger.log_metrics({{"time/remaining_estimate", remaining / divider_}});
}

void RuntimeEstimator::eval_end(State& state, Logger&) {
  if (!enabled_ || !start_time_) return;
  const double seconds = state.eval_timestamp.total_wct.count();
  total_eval_seconds_ += seconds;
  auto& evals = eval_seconds_per_label_[state.dataloader_label];
  evals.push_back(seconds);
  const auto elapsed = elapsed_duration(state);
  if (!elapsed) return;
  eval_frequency_per_label_[state.dataloader_label] = (*elapsed - start_dur_) / double(evals.size());
}

}  // namespace composer
