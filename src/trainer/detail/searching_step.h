// SearchingStep: automatic microbatching (Composer's device_train_microbatch_size "auto") around the EagerStep. It
// runs the step with the ranks checking in after each microbatch; when any rank ran out of memory, every rank drops
// what the attempt held, puts back the generator and metric states, halves the size and redoes the batch.
#pragma once

#include "composer/trainer/microbatch_search.h"
#include "trainer/detail/eager_step.h"

#include <string>
#include <vector>

namespace composer::detail {

class SearchingStep {
 public:
  SearchingStep(State& state, EagerStep& step);
  /// One optimizer step over state.batch at the largest halving of the size that fits (TrainStep::run says more).
  LossTotals run();

 private:
  void release_attempt();

  State& state_;
  EagerStep& step_;
  MicrobatchSearch search_;
  std::vector<std::string> shrinks_;  // "batch B: S -> T" for each batch that shrank
};

}  // namespace composer::detail
