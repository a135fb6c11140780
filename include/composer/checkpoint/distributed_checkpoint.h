// Sharded checkpoints in PyTorch's Distributed Checkpoint (DCP) layout (Composer's state_dict_type "sharded"): a
// directory holding one `__<rank>_0.distcp` per rank and a `.metadata` (a pickled
// torch.distributed.checkpoint.metadata.Metadata), so that torch.distributed.checkpoint reads it.
//
// The checkpoint's dict ({"state": ..., "rng": ...}, as a full checkpoint's) is flattened as DCP's default planner
// flattens it: nested dicts by "."-joined keys, lists that hold tensors or dicts by index, every other value a
// torch.save blob (BytesStorageMetadata). Each rank writes its part of every sharded tensor as rectangular chunks
// (a shard is a range of a parameter's row-major elements: at most a partial row, whole rows and a partial row per
// dimension); rank 0 writes the replicated tensors and the other values, and, once every rank's file is complete,
// the `.metadata`, last and atomically: a directory without one is an unfinished save, never loaded.
#pragma once

#include "composer/checkpoint/state_codec.h"

#include <ATen/core/ivalue.h>

#include <functional>
#include <optional>
#include <string>

namespace composer {

struct State;

/// The name of rank `rank`'s file in a sharded checkpoint directory.
std::string distcp_file_name(int64_t rank);

/// Whether `path` is a complete sharded checkpoint (a directory with a `.metadata`).
bool is_distributed_checkpoint(const std::string& path);

/// Writes `state` (and `rng`, gather_rng_states()'s list; gathered here when not given) into the directory `dir`;
/// `weights_only`: the model and metadata only, as make_checkpoint. A collective: every rank calls it. Throws
/// std::runtime_error naming the file that cannot be written.
void save_distributed_checkpoint(const State& state, const std::string& dir, bool weights_only = false,
                                 const std::optional<c10::IValue>& rng = std::nullopt);

/// Reads a sharded checkpoint directory, whoever wrote it (Composer C++ on any world size, or PyTorch's
/// torch.distributed.checkpoint with its default planner), into the payload a full checkpoint holds: every tensor
/// whole. Throws CheckpointError for a directory without `.metadata`, a damaged metadata or data file, or a chunk
/// missing from the files.
c10::IValue read_distributed_checkpoint(const std::string& dir);
/// The same, reading some tensors only in part: a tensor of the checkpoint's "state" for which `wanted` gives a range
/// is read in that range alone (from the chunks that overlap it; the others are not read), left out of the payload
/// and appended to `parts` by its path in "state". Throws CheckpointError as above, and for chunks that do not
/// cover the range.
c10::IValue read_distributed_checkpoint(const std::string& dir, const PartsWanted& wanted,
                                        std::vector<ShardedEntry>& parts);
/// Puts the checkpoint's file `name` (".metadata", "__0_0.distcp", ...) into the directory before it is first read.
using FetchCheckpointFile = std::function<void(const std::string& name)>;
/// The same, for a directory that starts empty: `fetch` brings each file just before it is first read, so that only
/// the files holding what is read arrive (a rank's part of a checkpoint in an object store: the .metadata, the files
/// with the chunks that overlap its ranges, and those with the stored values).
c10::IValue read_distributed_checkpoint(const std::string& dir, const PartsWanted& wanted,
                                        std::vector<ShardedEntry>& parts, const FetchCheckpointFile& fetch);

}  // namespace composer
