// Checkpoints in Composer's layout, readable by Python's torch.load as a plain dict:
//   {"state": {"model": {name: tensor}, "optimizers": {...}, "algorithms": [(name, state)],
//              "callbacks": {...}, "scaler": {...}, "timestamp": {"Timestamp": {...}}, "train_metrics": {...},
//              "rank_zero_seed": int, "run_name": str, "metadata": {...}},
//    "rng": [{"torch": uint8 tensor, "cuda": [uint8 tensor per device]} per rank]}
// Schedulers are stateless (Composer's LambdaLR state is not written): the lr follows from the timestamp.
// A weights-only checkpoint has {"state": {"model", "metadata"}}.
#pragma once

#include "composer/checkpoint/state_codec.h"
#include "composer/core/format_name.h"

#include <ATen/core/ivalue.h>

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace composer {

struct State;

/// A checkpoint that cannot be read or applied; the message names the file and the problem.
class CheckpointError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Every rank's generator states, in rank order (the checkpoint's "rng" entry). A collective when the world size is
/// above 1: every rank calls it, and every rank gets the whole list.
c10::IValue gather_rng_states();
/// The payload of a checkpoint of `state`; `rng` is gather_rng_states()'s list (gathered here when not given, so
/// on several ranks every rank must call this).
c10::IValue make_checkpoint(const State& state, bool weights_only = false,
                            const std::optional<c10::IValue>& rng = std::nullopt);
/// Writes make_checkpoint(state, weights_only, rng) to `path` crash-safely (write_file_atomically).
void save_checkpoint(const State& state, const std::string& path, bool weights_only = false,
                     const std::optional<c10::IValue>& rng = std::nullopt);
/// Reads and checks a checkpoint file: every zip record against its CRC-32 first (LibTorch does not), so damaged
/// tensor bytes are an error, not wrong weights. Throws CheckpointError for a missing, truncated, damaged or foreign
/// file.
c10::IValue read_checkpoint(const std::string& path);
/// The same, but a sharded checkpoint (a directory) is read only in part where `wanted` says
/// (read_distributed_checkpoint; under FSDP, local_parts_wanted: each rank its part); those tensors go to `parts`.
c10::IValue read_checkpoint(const std::string& path, const PartsWanted& wanted, std::vector<ShardedEntry>& parts);

struct CheckpointLoadOptions {
  /// Load only the model weights.
  bool weights_only = false;
  /// Every model key must match (names and shapes).
  bool strict_model = true;
  /// Glob patterns over "/"-joined paths to drop before loading, e.g. "state/optimizers", "state/model/fc.*", "rng".
  std::vector<std::string> ignore_keys;
};

/// Applies a checkpoint payload to `state` and returns its "rng" entry (to restore when training starts), if any.
/// `path` is only used in error messages; `parts`: what read_checkpoint read in part, which the options prune as they
/// do the payload. Throws CheckpointError naming the file and the mismatch.
std::optional<c10::IValue> apply_checkpoint(State& state, c10::IValue payload, const CheckpointLoadOptions& options,
                                            const std::string& path, std::vector<ShardedEntry> parts = {});
/// Restores the torch CPU (and CUDA) generators from a checkpoint's "rng" entry: this rank's element (the last one
/// when the checkpoint was written by fewer ranks).
void restore_rng(const c10::IValue& rng, int64_t rank = 0);

/// Removes the entries of `payload` matched by the glob patterns (paths like "state/model/fc.weight").
c10::IValue remove_keys(c10::IValue payload, const std::vector<std::string>& patterns);

}  // namespace composer
