// Composer's name formatting for files and remote objects.
#pragma once

#include <string>

namespace composer {

struct State;

/// Fills {run_name} {rank} {local_rank} {world_size} {local_world_size} {node_rank}; other placeholders are kept
/// (Composer's format_name_with_dist).
std::string format_name_with_dist(const std::string& pattern, const std::string& run_name);
/// format_name_with_dist plus the timestamp's {epoch} {batch} {batch_in_epoch} {sample} {sample_in_epoch} {token}
/// {token_in_epoch} {total_wct} {epoch_wct} {batch_wct}; unknown placeholders are kept.
std::string format_name(const std::string& pattern, const State& state);

}  // namespace composer
