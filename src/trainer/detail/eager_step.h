// EagerStep: the plain train step that TrainStep wraps. BEFORE_TRAIN_BATCH, the microbatches (each forward, loss
// and weighted backward), AFTER_TRAIN_BATCH, inside the optimizer's closure (or through the grad scaler). The
// automatic microbatch search (SearchingStep) and CUDA-graph replay (GraphedStep) are units around it.
#pragma once

#include "composer/core/event.h"
#include "composer/trainer/precision_context.h"
#include "composer/trainer/train_step.h"

#include <ATen/core/Tensor.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace composer {
class Batch;
class Engine;
class MicrobatchSearch;
struct State;
}  // namespace composer

namespace composer::detail {

using LossTotals = std::map<std::string, at::Tensor>;

/// Thrown by EagerStep::run when searching and some rank ran out of memory in the attempt: every rank redoes the
/// batch with a smaller size.
struct RetryBatch {};

/// The body of a microbatch: forward, losses, weighted backward, and its losses added to `totals`, firing the events
/// between through `fire`. An eager microbatch fires them on the Engine; recording a CUDA graph passes a no-op
/// (those events fire in eager steps only).
void forward_backward(State& s, PrecisionContext& precision, const std::function<void(Event)>& fire, double weight,
                      LossTotals& totals, bool sync_gradients);

/// Train metrics from the microbatch as it was before BEFORE_FORWARD, reusing the training outputs.
void update_train_metrics(State& s, const Batch& original_microbatch);

/// Whether an algorithm backpropagates with create_graph.
bool backwards_create_graph(const State& s);

class EagerStep {
 public:
  EagerStep(State& state, Engine& engine, PrecisionContext precision, TrainStepOptions options);

  /// One optimizer step over state.batch. `search` (automatic microbatching) makes every rank check in after each
  /// microbatch, keeps gradients unsynchronized until every rank is through, and turns an out-of-memory error into
  /// RetryBatch once the ranks agree one happened. `closure_runs` counts the closure's runs (SAM runs it twice).
  LossTotals run(const MicrobatchSearch* search, int& closure_runs);

 private:
  LossTotals train_microbatches(const MicrobatchSearch* search);
  void train_microbatch(double weight, LossTotals& totals, bool sync_gradients);

  State& state_;
  Engine& engine_;
  PrecisionContext precision_;
  TrainStepOptions options_;
};

}  // namespace composer::detail
