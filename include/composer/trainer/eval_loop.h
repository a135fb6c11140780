// EvalLoop: evaluates an evaluator, and during fit runs the evaluators whose interval is due.
#pragma once

#include "composer/core/event.h"
#include "composer/core/fields.h"
#include "composer/core/interval.h"
#include "composer/core/time.h"
#include "composer/trainer/precision_context.h"

#include <torch/arg.h>

#include <vector>

namespace composer {

class Engine;
class Logger;
struct Evaluator;
struct State;

struct EvalLoopOptions {
  /// Batches per evaluation for evaluators that set none; -1 = the whole loader.
  TORCH_ARG(int64_t, subset_num_batches) = -1;
  /// When evaluators without their own interval run during fit (Composer's eval_interval).
  TORCH_ARG(Time, eval_interval) = Time::from_epoch(1);

 public:
  /// The field list; the Trainer's key for subset_num_batches is eval_subset_num_batches.
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("eval_interval", ensure_time(TimeUnit::EPOCH, self.eval_interval_),
          "how often to evaluate; a bare integer is epochs");
    visit("subset_num_batches", self.subset_num_batches_, "batches per evaluation; -1: all");
  }
};

class EvalLoop {
 public:
  /// One interval scheduler per evaluator in state.evaluators (set them first).
  EvalLoop(State& state, Engine& engine, Logger& logger, EvalLoopOptions options = EvalLoopOptions());

  /// EVAL_START, per batch EVAL_BATCH_START / EVAL_BEFORE_FORWARD / EVAL_AFTER_FORWARD (per eval microbatch) /
  /// EVAL_BATCH_END, logs metrics/<label>/<Name> (over every rank's data), EVAL_END. state.eval_metrics[label]
  /// holds the metrics. The train loader and the model's mode are restored afterwards, also when it throws.
  void run(Evaluator& evaluator);
  /// The evaluators due at `event` during fit, wrapped in EVAL_BEFORE_ALL / EVAL_AFTER_ALL (nothing when none is).
  void run_due(Event event);

 private:
  State& state_;
  Engine& engine_;
  Logger& logger_;
  EvalLoopOptions options_;
  PrecisionContext precision_;
  std::vector<IntervalScheduler> due_;
};

}  // namespace composer
