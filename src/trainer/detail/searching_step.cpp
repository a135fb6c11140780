#include "trainer/detail/searching_step.h"

#include "composer/core/state.h"
#include "composer/dist/env.h"
#include "composer/dist/strategy.h"
#include "composer/optim/grad_scaler.h"
#include "composer/utils/error_text.h"
#include "composer/utils/reproducibility.h"

#include <torch/torch.h>

#include <iostream>
#include <stdexcept>

namespace composer::detail {
namespace {

// Automatic microbatching shrinks in the batch it starts with, and may again when a later batch needs more (longer
// inputs, a new high-water mark); a third batch that shrinks means memory in use keeps growing, and halving on would
// only postpone running out. `shrinks` holds one "batch B: S -> T" entry per batch that shrank.
constexpr size_t kMaxShrinkingBatches = 2;

void note_shrink(std::vector<std::string>& shrinks, int64_t batch, int64_t from, int64_t to) {
  const std::string label = "batch " + std::to_string(batch) + ": ";
  if (!shrinks.empty() && shrinks.back().rfind(label, 0) == 0) {
    shrinks.back() = shrinks.back().substr(0, shrinks.back().rfind(' ') + 1) + std::to_string(to);
    return;
  }
  shrinks.push_back(label + std::to_string(from) + " -> " + std::to_string(to));
  if (shrinks.size() <= kMaxShrinkingBatches) return;
  std::string list;
  for (const auto& entry : shrinks) list += (list.empty() ? "" : ", ") + entry;
  throw std::runtime_error("automatic microbatching: device_train_microbatch_size shrank in " +
                           std::to_string(shrinks.size()) + " different batches (" + list +
                           "): memory in use grows from batch to batch (tensors kept across steps, a growing cache), "
                           "and halving again would only postpone running out; find what holds the memory, or set "
                           "device_train_microbatch_size to a number");
}

}  // namespace

SearchingStep::SearchingStep(State& state, EagerStep& step)
    : state_(state), step_(step), search_("train", state.device) {}

// What a failed attempt left behind, as Composer's _clear_incomplete_train_states.
void SearchingStep::release_attempt() {
  State& s = state_;
  s.outputs = at::Tensor();
  s.loss = at::Tensor();
  s.losses.clear();
  s.optimizer->zero_grad(/*set_to_none=*/true);
  s.strategy->zero_grad();
  if (s.scaler) s.scaler->reset_step();
  release_cached_memory(s.device);
}

LossTotals SearchingStep::run() {
  State& s = state_;
  const Batch full_batch = s.batch;
  if (s.device_train_microbatch_size <= 0) s.device_train_microbatch_size = full_batch.num_samples();
  const GeneratorStates generators = GeneratorStates::capture();
  const MetricStates metric_states(s.train_metrics);
  for (;;) {
    int closure_runs = 0;
    try {
      return step_.run(&search_, closure_runs);
    } catch (const RetryBatch&) {
      if (closure_runs > 1) {
        throw std::runtime_error("automatic microbatching: out of memory in the optimizer's closure run " +
                                 std::to_string(closure_runs) +
                                 ", after an earlier run had moved the weights, so the batch cannot be redone; set "
                                 "device_train_microbatch_size to a number of samples");
      }
    } catch (const std::exception& e) {
      if (!is_out_of_memory(e)) throw;
      throw std::runtime_error(
          "automatic microbatching: out of memory after the microbatches (gradient averaging, AFTER_TRAIN_BATCH or "
          "the optimizer step), which a smaller microbatch does not shrink: " +
          brief_error(e));
    }
    release_attempt();
    generators.restore();
    metric_states.restore();
    const int64_t before = s.device_train_microbatch_size;
    s.device_train_microbatch_size = MicrobatchSearch::halve(before, "train");
    note_shrink(shrinks_, s.timestamp.batch, before, s.device_train_microbatch_size);
    if (dist::get_global_rank() == 0) {
      std::cerr << "composer: warning: out of memory at device_train_microbatch_size " << before << "; redoing batch "
                << s.timestamp.batch << " with " << s.device_train_microbatch_size << "\n";
    }
    s.batch = full_batch;
  }
}

}  // namespace composer::detail
