// TrainStep: one optimisation step over state.batch, split into microbatches. The unit a hand-written loop drives:
//   State s; Logger logger(s); Engine engine(s, logger);  (model, optimizer, algorithms, callbacks set, INIT run;
//   s.set_dataloader(...) and s.max_duration set, which Composer's Engine requires for training events)
//   TrainStep step(s, engine, logger);
//   for (auto& batch : batches) { s.batch = batch; step.run(); s.timestamp = s.timestamp.to_next_batch(n); }
// examples/train_step_loop.cpp is a complete one.
#pragma once

#include "composer/trainer/microbatch_search.h"
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
  /// microbatches. Logs trainer/device_train_microbatch_size (the samples per microbatch) every step, as Composer.
  ///
  /// With state.auto_microbatching (Composer's "auto") the size starts at the whole batch; when any rank runs out
  /// of memory inside the microbatches (is_out_of_memory), every rank drops what the attempt held (outputs, losses,
  /// gradients, the grad scaler's step record, the device's cached memory), puts back the generator states and
  /// train metrics as they were, halves state.device_train_microbatch_size and redoes the same batch from
  /// BEFORE_TRAIN_BATCH, so the step equals one run with the smaller size from the start. The ranks agree through
  /// MicrobatchSearch's collectives, and average gradients only after every rank is through its microbatches.
  /// Throws std::runtime_error when 1 sample does not fit, or when memory runs out after the microbatches
  /// (gradient averaging, AFTER_TRAIN_BATCH, the optimizer step), where a smaller microbatch would not help.
  std::map<std::string, at::Tensor> run();

 private:
  void train_microbatch(double weight, std::map<std::string, at::Tensor>& totals, bool sync_gradients);
  std::map<std::string, at::Tensor> train_microbatches();
  std::map<std::string, at::Tensor> step_optimizer(int& closure_runs);
  std::map<std::string, at::Tensor> run_searching();
  void release_attempt();

  State& state_;
  Engine& engine_;
  Logger& logger_;
  PrecisionContext precision_;
  MicrobatchSearch search_;
};

}  // namespace composer
