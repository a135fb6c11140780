// Whether a run saves FSDP's sharded checkpoints, and under which name: the saver and autoresume ask the same.
#pragma once

#include "composer/core/state.h"
#include "composer/dist/fully_sharded.h"

#include <optional>
#include <string>

namespace composer::detail {

/// FSDP's sharded_ckpt_prefix_dir when the run's checkpoints are sharded (a directory each), else none.
inline std::optional<std::string> sharded_checkpoint_prefix(const State& state) {
  const auto* fsdp = dynamic_cast<const dist::FullyShardedDataParallel*>(state.strategy.get());
  if (fsdp && fsdp->options().state_dict_type() == "sharded") return fsdp->options().sharded_ckpt_prefix_dir();
  return std::nullopt;
}

/// FSDP's load_monolith_rank0_only, where it applies (state_dict_type full): rank 0 alone reads checkpoints.
inline bool loads_on_rank0_only(const State& state) {
  const auto* fsdp = dynamic_cast<const dist::FullyShardedDataParallel*>(state.strategy.get());
  return fsdp && fsdp->options().load_monolith_rank0_only() && fsdp->options().state_dict_type() == "full";
}

}  // namespace composer::detail
