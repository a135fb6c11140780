// A torch.save checkpoint file read by parts: under a sharded strategy each rank reads of a tensor of the checkpoint's
// "state" only the bytes of the part it holds (the elements its shard needs, or its tensor-parallel boxes), as it
// does from a sharded (DCP) checkpoint, and every other tensor whole.
#pragma once

#include "composer/checkpoint/state_codec.h"
#include "formats/detail/zip_verify.h"

#include <ATen/core/ivalue.h>

#include <string>
#include <vector>

namespace composer::detail {

/// The payload of the torch.save archive `zip` (its directory read once; its bytes a file, or an object read by
/// ranges) without the tensors `wanted`
/// asks a part of (each read into `parts`, left out of its dict); every other tensor read whole. Does not verify the
/// records' CRC-32s (ZipArchive::verify). Throws std::runtime_error when the file is not a torch.save archive this
/// reader can read lazily (the caller then reads it whole); messages do not name the file.
c10::IValue read_file_parts(const ZipArchive& zip, const PartsWanted& wanted, std::vector<ShardedEntry>& parts);

}  // namespace composer::detail
