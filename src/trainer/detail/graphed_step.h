// GraphedStep: CUDA-graph replay (TrainStepOptions::cuda_graph) around the EagerStep. Warm-up steps run eagerly on
// a side stream; the next records forward, loss, backward and the optimizer step into a CUDA graph (CapturedStep),
// and every later batch of the same shapes is copied into the graph's inputs and replayed.
#pragma once

#include "trainer/detail/captured_step.h"
#include "trainer/detail/eager_step.h"

#include <memory>
#include <string>
#include <vector>

namespace composer::detail {

class GraphedStep {
 public:
  /// Throws std::invalid_argument listing obstacles(state) when there are any.
  GraphedStep(State& state, Engine& engine, PrecisionContext& precision, EagerStep& step,
              const TrainStepOptions& options);
  /// TrainStep::cuda_graph_obstacles.
  static std::vector<std::string> obstacles(const State& state);
  LossTotals run();

 private:
  LossTotals record();

  State& state_;
  Engine& engine_;
  PrecisionContext precision_;
  EagerStep& step_;
  int64_t warmup_steps_;
  int64_t eager_steps_ = 0;  // warm-up steps run so far
  std::unique_ptr<CapturedStep> graph_;
};

}  // namespace composer::detail
