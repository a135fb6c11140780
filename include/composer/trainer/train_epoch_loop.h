// TrainEpochLoop: one pass over the training data (or the rest of one, after a mid-epoch resume), batch by batch.
#pragma once

#include "composer/core/fields.h"

#include <torch/arg.h>

#include <chrono>

namespace composer {

class Batch;
class Engine;
class EvalLoop;
class Logger;
class TrainStep;
struct State;

struct TrainEpochLoopOptions {
  /// Step the schedulers after every batch (true) or every epoch (false).
  TORCH_ARG(bool, step_schedulers_every_batch) = true;
  /// Scales the schedules (Composer's scale_schedule_ratio; max_duration is scaled by the Trainer).
  TORCH_ARG(double, scale_schedule_ratio) = 1.0;

 public:
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("scale_schedule_ratio", self.scale_schedule_ratio_, "scales max_duration and the schedules");
    visit("step_schedulers_every_batch", self.step_schedulers_every_batch_,
          "step schedulers every batch, else every epoch");
  }
};

class TrainEpochLoop {
 public:
  TrainEpochLoop(State& state, Engine& engine, Logger& logger, TrainStep& step, EvalLoop& eval,
                 TrainEpochLoopOptions options = TrainEpochLoopOptions());

  /// Requires state.train_dataloader, state.max_duration. ITERATION_START (at an iteration's first epoch),
  /// EPOCH_START (at the epoch's first batch), then per batch BEFORE_DATALOADER, AFTER_DATALOADER, BATCH_START, the
  /// train step, BATCH_END, due evaluators, BATCH_CHECKPOINT; at the epoch's end EPOCH_END, due evaluators,
  /// EPOCH_CHECKPOINT (and ITERATION_END / ITERATION_CHECKPOINT when an iteration completes). Stops early when
  /// max_duration is reached. Throws std::runtime_error when the loader yields no batch.
  void run();
  /// Sets every group's lr from the schedulers (state.schedulers) at the current time.
  void step_schedulers();
  /// Logs time/batch, time/sample, ... (Composer's per-batch time values).
  void log_batch_time();

 private:
  void run_batch(Batch batch, std::chrono::steady_clock::time_point& last_batch_end);
  void log_train_metrics();
  void end_iteration();

  State& state_;
  Engine& engine_;
  Logger& logger_;
  TrainStep& step_;
  EvalLoop& eval_;
  TrainEpochLoopOptions options_;
};

}  // namespace composer
