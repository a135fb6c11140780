// Reading a sharded checkpoint (PyTorch's Distributed Checkpoint layout: a .metadata and one file per rank): the
// whole payload, or with local_parts_wanted this rank's parts of the tensors it holds only in part.
#include "composer/checkpoint/distributed_checkpoint.h"

#include "checkpoint/detail/dcp_files.h"
#include "checkpoint/detail/part_boxes.h"

#include "composer/checkpoint/checkpoint.h"
#include "composer/checkpoint/state_codec.h"
#include "composer/core/serialization.h"
#include "composer/utils/error_text.h"
#include "formats/detail/dcp_metadata.h"
#include "formats/detail/pickle_io.h"
#include "formats/detail/python_pickle.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

namespace composer {
namespace fs = std::filesystem;

using detail::int_vector;
using detail::kDcpMetadataModule;
using detail::kMetadataFile;
using detail::Path;

namespace {

// A reconstructed nested value: dict entries by str key, list entries by int index.
struct Node {
  std::vector<std::pair<c10::IValue, Node>> children;
  std::optional<c10::IValue> leaf;
  Node& child(const c10::IValue& key) {
    for (auto& [k, n] : children)
      if (k == key) return n;
    children.emplace_back(key, Node());
    return children.back().second;
  }
  c10::IValue value() const {
    if (leaf) return *leaf;
    bool indexed = !children.empty();
    for (const auto& [k, n] : children) indexed = indexed && k.isInt();
    if (indexed) {
      std::vector<const Node*> by_index(children.size(), nullptr);
      for (const auto& [k, n] : children) {
        const auto i = static_cast<size_t>(k.toInt());
        if (i >= by_index.size())
          throw CheckpointError("sharded checkpoint: a list has a gap at index " + std::to_string(i));
        by_index[i] = &n;
      }
      c10::impl::GenericList l(c10::AnyType::get());
      for (const Node* n : by_index) {
        if (!n) throw CheckpointError("sharded checkpoint: a list has a gap");
        l.push_back(n->value());
      }
      return l;
    }
    Dict d = new_dict();
    for (const auto& [k, n] : children) d.insert(k.isString() ? k.toStringRef() : std::to_string(k.toInt()), n.value());
    return d;
  }
};

c10::IValue state_field(const c10::IValue& object, const std::string& field, const std::string& what) {
  const c10::IValue st = detail::python_object_state(object);
  if (!st.isGenericDict() || !st.toGenericDict().contains(field))
    throw CheckpointError("sharded checkpoint: " + what + " has no '" + field + "'");
  return st.toGenericDict().at(field);
}

// A MetadataIndex's fqn and offset (none for a value's index).
std::pair<std::string, std::optional<std::vector<int64_t>>> index_key(const c10::IValue& key) {
  const c10::IValue st = detail::python_object_state(key);
  if (!st.isGenericDict() || !st.toGenericDict().contains("fqn"))
    throw CheckpointError("sharded checkpoint: a storage_data key is not a MetadataIndex");
  const Dict d = st.toGenericDict();
  std::optional<std::vector<int64_t>> offset;
  if (d.contains("offset") && !d.at("offset").isNone()) offset = int_vector(d.at("offset"));
  return {d.at("fqn").toStringRef(), offset};
}

struct Location {
  std::string file;
  int64_t offset = 0, length = 0;
};

// The row-major index of the element at `index` in a tensor of `shape`.
int64_t flat_index(const std::vector<int64_t>& shape, const std::vector<int64_t>& index) {
  int64_t flat = 0;
  for (size_t d = 0; d < shape.size(); ++d) flat = flat * shape[d] + index[d];
  return flat;
}

// Copies the elements of `chunk` (the box at `offsets` of a tensor of `shape`) that fall in the tensor's row-major
// range [begin, begin + part.numel()) into `part`; returns how many it copied.
int64_t copy_overlap(const at::Tensor& chunk, const std::vector<int64_t>& offsets, const std::vector<int64_t>& shape,
                     int64_t begin, at::Tensor& part) {
  const int64_t end = begin + part.numel();
  const std::vector<int64_t> sizes = chunk.sizes().vec();
  // A box is one contiguous range of the flattening when its leading dimensions are 1 and its trailing ones whole.
  size_t d = 0;
  while (d < sizes.size() && sizes[d] == 1) ++d;
  bool contiguous = true;
  for (size_t e = d + 1; e < sizes.size(); ++e) contiguous = contiguous && sizes[e] == shape[e];
  if (contiguous) {
    const int64_t first = flat_index(shape, offsets);
    const int64_t lo = std::max(begin, first), hi = std::min(end, first + chunk.numel());
    if (lo >= hi) return 0;
    part.narrow(0, lo - begin, hi - lo).copy_(chunk.reshape(-1).narrow(0, lo - first, hi - lo));
    return hi - lo;
  }
  at::Tensor index = at::zeros({}, at::kLong);
  for (size_t e = 0; e < sizes.size(); ++e) {
    std::vector<int64_t> view(sizes.size(), 1);
    view[e] = sizes[e];
    index = index * shape[e] + (at::arange(sizes[e], at::kLong) + offsets[e]).view(view);
  }
  const at::Tensor mine = (index >= begin).logical_and(index < end);
  const at::Tensor where = index.masked_select(mine) - begin;
  part.index_put_({where}, chunk.masked_select(mine).to(part.scalar_type()));
  return where.numel();
}

// The path of a tensor under the payload's "state", as local_parts_wanted takes it; empty outside "state".
std::vector<std::string> path_in_state(const Path& path) {
  std::vector<std::string> in_state;
  if (path.size() < 2 || !path.front().isString() || path.front().toStringRef() != "state") return in_state;
  for (size_t i = 1; i < path.size(); ++i)
    in_state.push_back(path[i].isString() ? path[i].toStringRef() : std::to_string(path[i].toInt()));
  return in_state;
}

// Whether the box of `sizes` at `offsets` in a tensor of `shape` has elements in the flattening's [first, second).
bool box_meets(const std::vector<int64_t>& shape, const std::vector<int64_t>& offsets,
               const std::vector<int64_t>& sizes, const std::pair<int64_t, int64_t>& range) {
  std::vector<int64_t> last = offsets;  // a box's first and last elements bound its range of the flattening
  for (size_t d = 0; d < last.size(); ++d) {
    if (sizes[d] == 0) return false;
    last[d] += sizes[d] - 1;
  }
  return flat_index(shape, last) >= range.first && flat_index(shape, offsets) < range.second;
}

// Whether the box `b` of the whole tensor and the chunk of `sizes` at `offsets` share elements.
bool boxes_meet(const detail::PlacedBox& b, const std::vector<int64_t>& offsets, const std::vector<int64_t>& sizes) {
  for (size_t d = 0; d < offsets.size(); ++d)
    if (std::max(b.offsets[d], offsets[d]) >= std::min(b.offsets[d] + b.sizes[d], offsets[d] + sizes[d])) return false;
  return true;
}

// Copies the elements of `chunk` (at `offsets` in the whole tensor) that fall in the boxes of a part into the part's
// values (which start at its piece's element `begin`); returns how many it copied.
int64_t copy_into_boxes(const at::Tensor& chunk, const std::vector<int64_t>& offsets,
                        const std::vector<detail::PlacedBox>& placed, int64_t begin, at::Tensor& part) {
  int64_t copied = 0;
  for (const auto& b : placed) {
    if (!boxes_meet(b, offsets, chunk.sizes().vec())) continue;
    at::Tensor to = detail::box_view(part, begin, b), from = chunk;
    for (size_t d = 0; d < offsets.size(); ++d) {
      const int64_t lo = std::max(b.offsets[d], offsets[d]);
      const int64_t hi = std::min(b.offsets[d] + b.sizes[d], offsets[d] + chunk.size(static_cast<int64_t>(d)));
      to = to.narrow(static_cast<int64_t>(d), lo - b.offsets[d], hi - lo);
      from = from.narrow(static_cast<int64_t>(d), lo - offsets[d], hi - lo);
    }
    to.copy_(from);
    copied += to.numel();
  }
  return copied;
}

// A DCP directory being read: its .metadata, where each stored value and tensor chunk lies, and the open files.
class DcpReader {
 public:
  DcpReader(const std::string& dir, detail::DcpFiles files) : dir_(dir), files_from_(std::move(files)) {
    if (files_from_.fetch) files_from_.fetch(kMetadataFile);
    read_metadata();
    index_storage();
  }
  const Dict& tensors_and_values() const { return md_; }
  const c10::IValue& planner() const { return planner_; }
  [[noreturn]] void fail(const std::string& what) const {
    throw CheckpointError("sharded checkpoint '" + dir_ + "'" + what);
  }

  // The value stored for `fqn` (BytesStorageMetadata).
  c10::IValue value(const std::string& fqn) {
    const auto loc = values_.find(fqn);
    if (loc == values_.end()) fail(": no data for '" + fqn + "'");
    return read_blob(loc->second, fqn);
  }

  // The chunk of `fqn` at `offsets`, which must be shaped `sizes`.
  at::Tensor chunk(const std::string& fqn, const std::vector<int64_t>& offsets, const std::vector<int64_t>& sizes) {
    const auto loc = chunks_.find({fqn, offsets});
    if (loc == chunks_.end()) fail(": a chunk of '" + fqn + "' is missing");
    const c10::IValue t = read_blob(loc->second, fqn);
    if (!t.isTensor() || t.toTensor().sizes() != c10::IntArrayRef(sizes))
      fail(": a chunk of '" + fqn + "' has the wrong shape");
    return t.toTensor();
  }

 private:
  void read_metadata() {
    const fs::path meta_path = fs::path(dir_) / kMetadataFile;
    std::error_code ec;
    if (!fs::is_regular_file(meta_path, ec))
      fail(" has no .metadata: the save that made it did not finish (or it is not a checkpoint)");
    c10::IValue metadata;
    try {
      std::ifstream in(meta_path, std::ios::binary);
      const std::string program((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      metadata = detail::unpickle_python_bytes(program);
    } catch (const std::exception& e) {
      fail(": its .metadata cannot be read: " + brief_error(e, 200));
    }
    if (detail::python_object_name(metadata) != std::string(kDcpMetadataModule) + ".Metadata")
      fail(": .metadata does not hold a DCP Metadata");
    md_ = state_field(metadata, "state_dict_metadata", "Metadata").toGenericDict();
    planner_ = detail::python_object_state(metadata).toGenericDict().at("planner_data");
    storage_data_ = state_field(metadata, "storage_data", "Metadata").toGenericDict();
  }

  void index_storage() {
    if (!storage_data_.contains("__python_items__")) fail(": its .metadata lists no stored data");
    for (const auto& item : storage_data_.at("__python_items__").toList()) {
      const auto& kv = item.get().toTupleRef().elements();
      const auto [fqn, offset] = index_key(kv.at(0));
      const Dict st = detail::python_object_state(kv.at(1)).toGenericDict();
      if (st.contains("transform_descriptors") && !st.at("transform_descriptors").isNone() &&
          !st.at("transform_descriptors").toList().empty())
        fail(": '" + fqn + "' is stored through stream transforms (compression), which are not supported");
      Location loc{st.at("relative_path").toStringRef(), st.at("offset").toInt(), st.at("length").toInt()};
      if (offset)
        chunks_[{fqn, *offset}] = loc;
      else
        values_[fqn] = loc;
    }
  }

  // The stored bytes at `loc`: a ranged read when the files allow it, else from the file (fetched whole once).
  std::string bytes_at(const Location& loc, const std::string& fqn) {
    if (files_from_.read) {
      std::string bytes = files_from_.read(loc.file, loc.offset, loc.length);
      if (static_cast<int64_t>(bytes.size()) != loc.length)
        fail(": '" + loc.file + "' is truncated (the bytes of '" + fqn + "' end early)");
      return bytes;
    }
    auto it = files_.find(loc.file);
    if (it == files_.end()) {
      if (files_from_.fetch) files_from_.fetch(loc.file);
      it = files_.emplace(loc.file, std::ifstream(fs::path(dir_) / loc.file, std::ios::binary)).first;
      if (!it->second) fail(": its file '" + loc.file + "' is missing");
    }
    std::string bytes(static_cast<size_t>(loc.length), '\0');
    it->second.clear();
    it->second.seekg(loc.offset);
    it->second.read(bytes.data(), loc.length);
    if (it->second.gcount() != loc.length)
      fail(": '" + loc.file + "' is truncated (the bytes of '" + fqn + "' end early)");
    return bytes;
  }

  c10::IValue read_blob(const Location& loc, const std::string& fqn) {
    const std::string bytes = bytes_at(loc, fqn);
    try {
      return detail::unpickle_bytes(bytes);
    } catch (const std::exception& e) {
      fail(": the bytes of '" + fqn + "' in '" + loc.file + "' are damaged: " + brief_error(e, 200));
    }
  }

  std::string dir_;
  detail::DcpFiles files_from_;  // unset: every file is in dir_ already
  Dict md_ = new_dict();
  Dict storage_data_ = new_dict();
  c10::IValue planner_;
  std::map<std::pair<std::string, std::vector<int64_t>>, Location> chunks_;
  std::map<std::string, Location> values_;
  std::map<std::string, std::ifstream> files_;
};

// A tensor's payload path: the planner's, else its fqn split at the dots.
Path payload_path(const c10::IValue& planner, const std::string& fqn) {
  Path path;
  if (planner.isGenericDict() && planner.toGenericDict().contains(fqn)) {
    for (const auto& p : planner.toGenericDict().at(fqn).toTupleRef().elements()) path.push_back(p);
    return path;
  }
  std::stringstream ss(fqn);
  for (std::string part; std::getline(ss, part, '.');) path.emplace_back(part);
  return path;
}

// A tensor (TensorStorageMetadata `meta`) read whole, or, when `wanted` asks for a range of it, read in part into
// `parts` (then none).
std::optional<at::Tensor> read_tensor(DcpReader& reader, const std::string& fqn, const c10::IValue& meta,
                                      const Path& path, const PartsWanted& wanted, std::vector<ShardedEntry>& parts) {
  const auto props = detail::python_object_state(state_field(meta, "properties", fqn));
  const std::string dtype_global = props.toTupleRef().elements().at(0).toGenericDict().begin()->value().toStringRef();
  const std::optional<at::ScalarType> dtype_read = detail::dtype_from_name(dtype_global);
  if (!dtype_read) reader.fail(": '" + fqn + "' has dtype " + dtype_global + ", which is not supported");
  const at::ScalarType dtype = *dtype_read;
  const std::vector<int64_t> shape = int_vector(state_field(meta, "size", fqn));
  const std::vector<std::string> in_state = wanted ? path_in_state(path) : std::vector<std::string>{};
  const std::optional<WantedPart> range =
      in_state.empty() ? std::nullopt : wanted(in_state, shape);  // this rank's range, when it reads only part
  const at::Tensor whole = range ? at::Tensor() : at::zeros(shape, dtype);
  at::Tensor part = range ? at::zeros({range->end - range->begin}, dtype) : at::Tensor();
  // A tensor-parallel piece's range: the boxes of the whole tensor it covers.
  const std::vector<detail::PlacedBox> placed =
      range && range->piece ? detail::placed_boxes(shape, range->begin, range->end, range->piece)
                            : std::vector<detail::PlacedBox>{};
  int64_t covered = 0;
  for (const auto& c : state_field(meta, "chunks", fqn).toList()) {
    const std::vector<int64_t> offsets = int_vector(state_field(c.get(), "offsets", fqn));
    const std::vector<int64_t> sizes = int_vector(state_field(c.get(), "sizes", fqn));
    if (range && range->piece) {
      if (!std::any_of(placed.begin(), placed.end(), [&](const auto& b) { return boxes_meet(b, offsets, sizes); }))
        continue;
      covered += copy_into_boxes(reader.chunk(fqn, offsets, sizes), offsets, placed, range->begin, part);
      continue;
    }
    if (range && !box_meets(shape, offsets, sizes, {range->begin, range->end})) continue;
    const at::Tensor t = reader.chunk(fqn, offsets, sizes);
    if (range) {
      covered += copy_overlap(t, offsets, shape, range->begin, part);
      continue;
    }
    at::Tensor target = whole;
    for (size_t d = 0; d < offsets.size(); ++d) target = target.narrow(static_cast<int64_t>(d), offsets[d], sizes[d]);
    target.copy_(t);
  }
  if (!range) return whole;
  if (covered != part.numel()) {
    reader.fail(": the chunks of '" + fqn + "' hold " + std::to_string(covered) + " of the " +
                std::to_string(part.numel()) + " elements this rank needs");
  }
  parts.push_back({in_state, dist::LocalPart{shape, dtype, range->begin, range->end, part, range->piece}});
  return std::nullopt;
}

}  // namespace

c10::IValue read_distributed_checkpoint(const std::string& dir, const PartsWanted& wanted,
                                        std::vector<ShardedEntry>& parts) {
  return read_distributed_checkpoint(dir, wanted, parts, FetchCheckpointFile());
}

c10::IValue read_distributed_checkpoint(const std::string& dir, const PartsWanted& wanted,
                                        std::vector<ShardedEntry>& parts, const FetchCheckpointFile& fetch) {
  return detail::read_distributed_checkpoint(dir, wanted, parts, detail::DcpFiles{fetch, {}});
}

c10::IValue detail::read_distributed_checkpoint(const std::string& dir, const PartsWanted& wanted,
                                                std::vector<ShardedEntry>& parts, const DcpFiles& files) {
  DcpReader reader(dir, files);
  Node root;
  for (const auto& e : reader.tensors_and_values()) {
    const std::string fqn = e.key().toStringRef();
    const Path path = payload_path(reader.planner(), fqn);
    c10::IValue value;
    const std::string kind = detail::python_object_name(e.value());
    if (kind == std::string(kDcpMetadataModule) + ".BytesStorageMetadata") {
      value = reader.value(fqn);
    } else if (kind == std::string(kDcpMetadataModule) + ".TensorStorageMetadata") {
      const std::optional<at::Tensor> whole = read_tensor(reader, fqn, e.value(), path, wanted, parts);
      if (!whole) {
        Node* n = &root;  // its dict stays, even when all its entries are read in part
        for (size_t i = 0; i + 1 < path.size(); ++i) n = &n->child(path[i]);
        continue;
      }
      value = *whole;
    } else {
      reader.fail(": '" + fqn + "' has unknown storage metadata " + kind);
    }
    Node* n = &root;
    for (const auto& p : path) n = &n->child(p);
    n->leaf = value;
  }
  c10::IValue payload = root.value();
  if (!payload.isGenericDict() || !payload.toGenericDict().contains("state") ||
      !payload.toGenericDict().at("state").isGenericDict())
    reader.fail(" is not a Composer checkpoint (no 'state' dict)");
  return payload;
}

c10::IValue read_distributed_checkpoint(const std::string& dir) {
  std::vector<ShardedEntry> parts;
  return read_distributed_checkpoint(dir, PartsWanted(), parts);
}

}  // namespace composer
