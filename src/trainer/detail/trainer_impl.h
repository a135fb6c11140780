// TrainerImpl: what the Trainer facade owns: the State, Logger and Engine, and the loop units built over them.
#pragma once

#include "composer/core/engine.h"
#include "composer/core/logger.h"
#include "composer/core/state.h"
#include "composer/trainer/eval_loop.h"
#include "composer/trainer/fit_loop.h"
#include "composer/trainer/predict_loop.h"
#include "composer/trainer/train_epoch_loop.h"
#include "composer/trainer/train_step.h"
#include "composer/trainer/trainer_options.h"

#include <memory>

namespace composer::detail {

struct TrainerImpl {
  explicit TrainerImpl(TrainerOptions opts);

  TrainerOptions options;
  State state;
  Logger logger;
  Engine engine;
  // Built once the State is complete (after loading), in this order.
  std::unique_ptr<TrainStep> train_step;
  std::unique_ptr<EvalLoop> eval_loop;
  std::unique_ptr<TrainEpochLoop> epoch_loop;
  std::unique_ptr<FitLoop> fit_loop;
  std::unique_ptr<PredictLoop> predict_loop;
  // The CPU block cache, held from the first fit(), eval() or predict() until close() (options.tune_allocator).
  std::shared_ptr<void> block_cache;
  void hold_block_cache();
};

}  // namespace composer::detail
