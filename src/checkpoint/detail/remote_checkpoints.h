// Checkpoints in object stores, for loading: downloading one to read it, and finding a run's newest checkpoints in
// an object-store save folder (the pointer object first, then the listing).
#pragma once

#include "composer/checkpoint/state_codec.h"

#include <ATen/core/ivalue.h>

#include <string>
#include <vector>

namespace composer {
struct State;
class ObjectStore;
}  // namespace composer

namespace composer::detail {

/// "folder/" for an object-store folder path, "" for the bucket's top (object names are prefix + file name).
std::string folder_prefix(const std::string& folder);
/// From one listing of `prefix`, without the prefix: the objects directly in it (no deeper '/'), and the sharded
/// checkpoint folders directly in it whose .metadata is there (complete), by folder name.
std::vector<std::string> checkpoint_names_in_folder(ObjectStore& store, const std::string& prefix);

/// Reads a checkpoint from a local path or an object-store URI (downloaded to a temporary file, read and checked as
/// read_checkpoint does, then removed). A URI that names a folder of objects is a sharded checkpoint: read when its
/// .metadata is there, else a CheckpointError saying the save did not finish. Throws CheckpointError naming the path
/// or URI.
c10::IValue read_checkpoint_from(const std::string& source);
/// The same, a sharded checkpoint read only in part where `wanted` says (read_checkpoint's overload); one in an
/// object store is still downloaded whole.
c10::IValue read_checkpoint_from(const std::string& source, const PartsWanted& wanted,
                                 std::vector<ShardedEntry>& parts);

/// The URIs of the checkpoints of `save` (an object-store folder) to try for autoresume, newest first: every object
/// or complete sharded checkpoint folder matching the filename pattern by its number, then the pointer object's
/// target when it is not among them. Objects of an upload in progress are not listed (S3 objects appear only
/// complete), and a sharded folder counts only once its .metadata (uploaded last) is there.
std::vector<std::string> remote_checkpoint_candidates(const std::string& folder_uri, const std::string& filename,
                                                      const std::string& latest_filename, const State& state);

}  // namespace composer::detail
