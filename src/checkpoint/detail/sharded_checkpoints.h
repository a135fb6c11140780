// Whether a run saves sharded checkpoints, and under which name: the saver and autoresume ask the strategy the same.
#pragma once

#include "composer/core/state.h"
#include "composer/dist/strategy.h"

#include <optional>
#include <string>

namespace composer::detail {

/// The strategy's sharded checkpoint name pattern (FSDP's sharded_ckpt_prefix_dir) when the run's checkpoints are
/// sharded (a directory each), else none.
inline std::optional<std::string> sharded_checkpoint_prefix(const State& state) {
  return state.strategy ? state.strategy->sharded_checkpoint_prefix() : std::nullopt;
}

/// Whether rank 0 alone reads one-file checkpoints (FSDP's load_monolith_rank0_only, with state_dict_type full).
inline bool loads_on_rank0_only(const State& state) {
  return state.strategy && state.strategy->loads_checkpoints_on_rank0_only();
}

}  // namespace composer::detail
