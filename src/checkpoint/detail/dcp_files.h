// Where a sharded (DCP) checkpoint's files come from when they are not all on disk already (an object store): whole
// files brought into the directory, or byte ranges of the data files read directly, so that a rank fetches only the
// chunks its part needs.
#pragma once

#include "composer/checkpoint/distributed_checkpoint.h"

#include <ATen/core/ivalue.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace composer::detail {

struct DcpFiles {
  /// Brings file `name` whole into the directory before it is opened (the .metadata always; the data files too
  /// when `read` is unset).
  FetchCheckpointFile fetch;
  /// When set: bytes [offset, offset + length) of data file `name` (a ranged read).
  std::function<std::string(const std::string& name, int64_t offset, int64_t length)> read;
};

/// read_distributed_checkpoint (distributed_checkpoint.h) with its files from `files`.
c10::IValue read_distributed_checkpoint(const std::string& dir, const PartsWanted& wanted,
                                        std::vector<ShardedEntry>& parts, const DcpFiles& files);

}  // namespace composer::detail
