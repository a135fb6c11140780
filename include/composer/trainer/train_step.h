// TrainStep: one optimisation step over state.batch, split into microbatches. The unit a hand-written loop drives:
//   State s; Logger logger(s); Engine engine(s, logger);  (model, optimizer, algorithms, callbacks set, INIT run;
//   s.set_dataloader(...) and s.max_duration set, which Composer's Engine requires for training events)
//   TrainStep step(s, engine, logger);
//   for (auto& batch : batches) { s.batch = batch; step.run(); s.timestamp = s.timestamp.to_next_batch(n); }
// examples/train_step_loop.cpp is a complete one.
#pragma once

#include "composer/trainer/precision_context.h"

#include <ATen/core/Tensor.h>

#include <map>
#include <string>

namespace composer {

class Engine;
class Logger;
struct State;

class TrainStep {
 public:
  /// Its settings are State's, because algorithms and automatic microbatching change them during a run:
  /// state.precision and state.device (read here: throws std::invalid_argument for amp_fp16 off CUDA),
  /// state.device_train_microbatch_size and state.strategy (read every step).
  TrainStep(State& state, Engine& engine, Logger& logger);

  /// Requires: state.model, state.optimizer, state.batch on state.device (state.scaler for amp_fp16), and
  /// state.dataloader and state.max_duration (the Engine refuses training events without them).
  /// Fires BEFORE_TRAIN_BATCH, per microbatch of state.device_train_microbatch_size samples (0 = the whole batch)
  /// BEFORE_FORWARD .. AFTER_BACKWARD, then AFTER_TRAIN_BATCH, inside the optimizer's closure, and steps the
  /// optimizer (through the grad scaler for amp_fp16). Each microbatch's loss is weighted by its samples over
  /// state.strategy's mean batch size, so the summed gradient equals the full-batch gradient (over every rank).
  /// Returns this rank's batch losses, detached: "total" and each named loss, the sample-weighted mean over
  /// microbatches. Seam for automatic microbatching: a retry with a smaller size starts again at BEFORE_TRAIN_BATCH.
  std::map<std::string, at::Tensor> run();

 private:
  void train_microbatch(double weight, std::map<std::string, at::Tensor>& totals, bool sync_gradients);
  std::map<std::string, at::Tensor> train_microbatches();

  State& state_;
  Engine& engine_;
  Logger& logger_;
  PrecisionContext precision_;
};

}  // namespace composer
