// TrainerImpl: what the Trainer facade owns, shared by the loop units.
#pragma once

#include "composer/core/engine.h"
#include "composer/core/logger.h"
#include "composer/core/state.h"
#include "composer/dist/gradient_reducer.h"
#include "composer/trainer/trainer_options.h"
#include "composer/utils/interval.h"
#include "trainer/detail/precision_context.h"

#include <ATen/core/ivalue.h>

#include <memory>
#include <optional>
#include <vector>

namespace composer::detail {

struct TrainerImpl {
  explicit TrainerImpl(TrainerOptions opts);

  TrainerOptions options;
  State state;
  Logger logger;
  Engine engine;
  std::unique_ptr<PrecisionContext> precision;
  /// Each parameter group's lr before any schedule (schedulers multiply it).
  std::vector<double> base_lrs;
  /// One interval scheduler per evaluator (state.evaluators order).
  std::vector<IntervalScheduler> eval_due;
  /// RNG states from a loaded checkpoint, restored when training starts (after the Trainer's reseeding).
  std::optional<c10::IValue> pending_rng;
  /// Averages gradients across ranks when the world size is above 1.
  std::unique_ptr<dist::GradientReducer> reducer;
  /// backward(create_graph=true) when an algorithm asks for it.
  bool backwards_create_graph = false;
};

}  // namespace composer::detail
