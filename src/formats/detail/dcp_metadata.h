// A sharded checkpoint's layout: the file names, dtype names, and writing its .metadata
// (torch.distributed.checkpoint.metadata.Metadata pickled as Python rebuilds it: its dataclasses made with NEWOBJ and
// BUILD, torch.Size and dtypes as torch's globals).
#pragma once

#include <ATen/core/ivalue.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace composer::detail {

inline constexpr const char* kDcpMetadataModule = "torch.distributed.checkpoint.metadata";
inline constexpr const char* kMetadataFile = ".metadata";  // beside the ranks' __<rank>_0.distcp files

/// torch's attribute name of a dtype ("float32"); std::invalid_argument for a dtype a sharded checkpoint cannot hold.
std::string dtype_name(at::ScalarType t);
/// The dtype of a "torch.float32" name; none for a dtype a sharded checkpoint cannot hold.
std::optional<at::ScalarType> dtype_from_name(const std::string& name);
/// The integers of a list or tuple value (a size, offsets).
std::vector<int64_t> int_vector(const c10::IValue& v);

using Path = std::vector<c10::IValue>;  // DCP's object path: str keys and int list indices

/// A tensor of the checkpoint: dtype (a torch attribute name, "float32"), size, and its chunks.
struct TensorInfo {
  std::string dtype;
  std::vector<int64_t> size;
  std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> chunks;  // offsets, sizes
};
/// Where one chunk (offsets set) or one value (offsets none) is stored.
struct StorageRecord {
  std::string fqn;
  std::optional<std::vector<int64_t>> offsets;  // none for bytes
  std::string file;
  int64_t offset = 0, length = 0;
};

/// The .metadata bytes: every flat key of `order` (tensors in `tensors`, the rest values), each one's object path
/// (DCP's planner_data), and where each chunk and value is stored.
std::string dcp_metadata_pickle(const std::vector<std::string>& order, const std::map<std::string, TensorInfo>& tensors,
                                const std::map<std::string, Path>& paths, const std::vector<StorageRecord>& storage);

}  // namespace composer::detail
