// Process placement read from the launcher's environment (RANK, WORLD_SIZE, LOCAL_RANK, ...), Composer's
// utils/dist getters. Single-process defaults when unset. Collectives come with the distributed component.
#pragma once

#include <cstdint>

namespace composer::dist {

/// RANK, default 0.
int64_t get_global_rank();
/// WORLD_SIZE, default 1.
int64_t get_world_size();
/// LOCAL_RANK, default 0.
int64_t get_local_rank();
/// LOCAL_WORLD_SIZE, default 1.
int64_t get_local_world_size();
/// NODE_RANK, else GROUP_RANK (set by torchrun), default 0.
int64_t get_node_rank();

}  // namespace composer::dist
