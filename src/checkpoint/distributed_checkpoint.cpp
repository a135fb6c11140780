#include "composer/checkpoint/distributed_checkpoint.h"

#include "checkpoint/detail/dcp_metadata.h"
#include "checkpoint/detail/pickle_io.h"
#include "checkpoint/detail/python_pickle.h"
#include "composer/checkpoint/checkpoint.h"
#include "composer/checkpoint/state_codec.h"
#include "composer/core/serialization.h"
#include "composer/core/state.h"
#include "composer/dist/dist.h"
#include "composer/dist/env.h"
#include "composer/utils/atomic_file.h"
#include "composer/utils/error_text.h"

#include <ATen/ATen.h>
#include <torch/serialize.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace composer {
namespace fs = std::filesystem;
namespace {

constexpr const char* kMetadataFile = ".metadata";
using detail::kDcpMetadataModule;
using detail::Path;
using detail::StorageRecord;
using detail::TensorInfo;

std::string join_fqn(const Path& path) {
  std::string out;
  for (const auto& p : path) {
    if (!out.empty()) out += '.';
    out += p.isString() ? p.toStringRef() : std::to_string(p.toInt());
  }
  return out;
}

// DCP's _traverse: dicts are walked; a list is walked when it holds a tensor or a dict (or such a list); every
// other value (tuples too) is one leaf.
bool is_terminal(const c10::IValue& v) {
  if (v.isGenericDict()) return false;
  if (!v.isList()) return true;
  for (const auto& e : v.toList()) {
    const c10::IValue entry = e.get();
    if ((entry.isGenericDict() || entry.isList()) && !is_terminal(entry)) return false;
    if (entry.isTensor()) return false;
  }
  return true;
}

void flatten(const c10::IValue& v, Path path, std::vector<std::pair<Path, c10::IValue>>& leaves) {
  if (v.isGenericDict()) {
    for (const auto& e : v.toGenericDict()) {
      Path child = path;
      child.emplace_back(e.key().isString() ? e.key().toStringRef() : std::to_string(e.key().toInt()));
      flatten(e.value(), std::move(child), leaves);
    }
  } else if (is_terminal(v)) {
    leaves.emplace_back(std::move(path), v);
  } else {
    const auto list = v.toList();
    for (size_t i = 0; i < list.size(); ++i) {
      Path child = path;
      child.emplace_back(static_cast<int64_t>(i));
      flatten(list.get(i), std::move(child), leaves);
    }
  }
}

// A rectangular piece of a tensor: `sizes` at `offsets`, holding the row-major elements from `first` on.
struct Box {
  std::vector<int64_t> offsets, sizes;
  int64_t first = 0;
};

// The boxes that cover the row-major elements [begin, end) of a tensor of `shape`: per dimension at most a partial
// row, a block of whole rows and a partial row. Each box is a contiguous range of the flattening, in order.
void boxes(const std::vector<int64_t>& shape, size_t dim, int64_t begin, int64_t end, std::vector<int64_t> prefix,
           int64_t base, std::vector<Box>& out) {
  if (begin >= end) return;
  if (dim == shape.size()) {  // a 0-dim tensor: its one element
    out.push_back({prefix, {}, base});
    return;
  }
  int64_t inner = 1;
  for (size_t d = dim + 1; d < shape.size(); ++d) inner *= shape[d];
  const auto whole = [&](int64_t row_begin, int64_t row_end) {
    Box b;
    b.offsets = prefix;
    b.offsets.push_back(row_begin);
    for (size_t d = dim + 1; d < shape.size(); ++d) b.offsets.push_back(0);
    b.sizes.assign(prefix.size(), 1);
    b.sizes.push_back(row_end - row_begin);
    for (size_t d = dim + 1; d < shape.size(); ++d) b.sizes.push_back(shape[d]);
    b.first = base + row_begin * inner;
    out.push_back(std::move(b));
  };
  const int64_t first_row = begin / inner, last_row = (end - 1) / inner;
  if (inner == 1) {
    whole(begin, end);
    return;
  }
  const auto partial = [&](int64_t row, int64_t from, int64_t to) {
    std::vector<int64_t> p = prefix;
    p.push_back(row);
    boxes(shape, dim + 1, from, to, p, base + row * inner, out);
  };
  if (first_row == last_row) {
    if (begin % inner == 0 && end - begin == inner)
      whole(first_row, first_row + 1);
    else
      partial(first_row, begin - first_row * inner, end - first_row * inner);
    return;
  }
  int64_t full_begin = first_row;
  if (begin % inner != 0) {
    partial(first_row, begin % inner, inner);
    full_begin = first_row + 1;
  }
  const int64_t full_end = end % inner == 0 ? last_row + 1 : last_row;
  if (full_begin < full_end) whole(full_begin, full_end);
  if (end % inner != 0) partial(last_row, 0, end % inner);
}

std::string dtype_name(at::ScalarType t) {
  switch (t) {
    case at::kFloat:
      return "float32";
    case at::kDouble:
      return "float64";
    case at::kHalf:
      return "float16";
    case at::kBFloat16:
      return "bfloat16";
    case at::kLong:
      return "int64";
    case at::kInt:
      return "int32";
    case at::kShort:
      return "int16";
    case at::kChar:
      return "int8";
    case at::kByte:
      return "uint8";
    case at::kBool:
      return "bool";
    default:
      throw std::invalid_argument(std::string("sharded checkpoint: tensors of dtype ") + c10::toString(t) +
                                  " are not supported");
  }
}

at::ScalarType dtype_from_name(const std::string& name, const std::string& fqn) {
  for (at::ScalarType t : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16, at::kLong, at::kInt, at::kShort,
                           at::kChar, at::kByte, at::kBool})
    if ("torch." + dtype_name(t) == name) return t;
  throw CheckpointError("sharded checkpoint: '" + fqn + "' has dtype " + name + ", which is not supported");
}

std::string blob(const c10::IValue& value) {
  std::string out;
  detail::pickle_to(value, [&](const void* data, size_t size) { out.append(static_cast<const char*>(data), size); });
  return out;
}

c10::List<int64_t> int_list(const std::vector<int64_t>& v) {
  c10::List<int64_t> out;
  for (int64_t x : v) out.push_back(x);
  return out;
}
std::vector<int64_t> int_vector(const c10::IValue& v) {
  std::vector<int64_t> out;
  if (v.isTuple())
    for (const auto& e : v.toTupleRef().elements()) out.push_back(e.toInt());
  else
    for (const auto& e : v.toList()) out.push_back(e.get().toInt());
  return out;
}

// One rank's records, as they travel to rank 0: ("t", fqn, dtype, size, offsets, sizes, file offset, length) for
// a chunk (offsets empty and length -1 for a tensor of which the rank holds nothing), ("b", fqn, path..., offset,
// length) for a value.
using Records = c10::impl::GenericList;

c10::IValue path_ivalue(const Path& path) {
  c10::impl::GenericList l(c10::AnyType::get());
  for (const auto& p : path) l.push_back(p);
  return l;
}

}  // namespace

std::string distcp_file_name(int64_t rank) { return "__" + std::to_string(rank) + "_0.distcp"; }

bool is_distributed_checkpoint(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) && fs::is_regular_file(fs::path(path) / kMetadataFile, ec);
}

void save_distributed_checkpoint(const State& state, const std::string& dir, bool weights_only,
                                 const std::optional<c10::IValue>& rng) {
  const int64_t rank = dist::get_global_rank();
  std::vector<ShardedEntry> sharded;
  Dict top = new_dict();
  const Dict local = local_state_dict(state, sharded).toGenericDict();
  if (weights_only) {
    Dict slim = new_dict();
    for (const char* key : {"model", "metadata"})
      if (local.contains(key)) slim.insert(key, local.at(key));
    top.insert("state", slim);
    std::vector<ShardedEntry> model_only;
    for (auto& e : sharded)
      if (e.path.front() == "model") model_only.push_back(std::move(e));
    sharded = std::move(model_only);
  } else {
    top.insert("state", local);
    top.insert("rng", rng ? *rng : gather_rng_states());
  }
  std::vector<std::pair<Path, c10::IValue>> leaves;
  flatten(top, {}, leaves);

  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw std::runtime_error("sharded checkpoint: cannot create '" + dir + "': " + ec.message());
  const std::string file = distcp_file_name(rank);
  Records records(c10::AnyType::get());
  write_file_atomically((fs::path(dir) / file).string(), [&](const ByteSink& sink) {
    int64_t at = 0;
    const auto put = [&](const std::string& bytes) {
      sink(bytes.data(), bytes.size());
      const int64_t start = at;
      at += static_cast<int64_t>(bytes.size());
      return start;
    };
    for (const auto& e : sharded) {
      Path path{std::string("state")};
      for (const auto& p : e.path) path.emplace_back(p);
      const std::string fqn = join_fqn(path);
      const dist::LocalPart& part = e.part;
      std::vector<Box> pieces;
      boxes(part.shape, 0, part.begin, part.end, {}, 0, pieces);
      if (pieces.empty()) {
        records.push_back(
            c10::ivalue::Tuple::create({std::string("t"), fqn, path_ivalue(path), dtype_name(part.dtype),
                                        int_list(part.shape), int_list({}), int_list({}), int64_t{0}, int64_t{-1}}));
      }
      for (const Box& b : pieces) {
        int64_t n = 1;
        for (int64_t s : b.sizes) n *= s;
        const at::Tensor chunk = part.values.narrow(0, b.first - part.begin, n).reshape(b.sizes).clone();
        const std::string bytes = blob(chunk);
        const int64_t offset = put(bytes);
        records.push_back(c10::ivalue::Tuple::create({std::string("t"), fqn, path_ivalue(path), dtype_name(part.dtype),
                                                      int_list(part.shape), int_list(b.offsets), int_list(b.sizes),
                                                      offset, static_cast<int64_t>(bytes.size())}));
      }
    }
    if (rank != 0) return;  // the replicated tensors and the other values: rank 0's
    for (const auto& [path, value] : leaves) {
      const std::string fqn = join_fqn(path);
      if (value.isTensor()) {
        const at::Tensor t = value.toTensor().detach().to(at::kCPU).contiguous().clone();
        const std::vector<int64_t> shape = t.sizes().vec();
        const std::string bytes = blob(t);
        const int64_t offset = put(bytes);
        records.push_back(
            c10::ivalue::Tuple::create({std::string("t"), fqn, path_ivalue(path), dtype_name(t.scalar_type()),
                                        int_list(shape), int_list(std::vector<int64_t>(shape.size(), 0)),
                                        int_list(shape), offset, static_cast<int64_t>(bytes.size())}));
      } else {
        const std::string bytes = blob(value);
        const int64_t offset = put(bytes);
        records.push_back(c10::ivalue::Tuple::create(
            {std::string("b"), fqn, path_ivalue(path), offset, static_cast<int64_t>(bytes.size())}));
      }
    }
  });
  // Every rank's file is complete (renamed into place) before rank 0 hears its records; the metadata goes last.
  const std::vector<char> mine = torch::pickle_save(records);
  const std::vector<std::string> all = dist::all_gather_object(std::string(mine.begin(), mine.end()));
  if (rank != 0) return;
  std::vector<std::string> order;
  std::map<std::string, TensorInfo> tensors;
  std::map<std::string, Path> paths;
  std::vector<StorageRecord> storage;
  for (size_t r = 0; r < all.size(); ++r) {
    const auto list = torch::pickle_load(std::vector<char>(all[r].begin(), all[r].end())).toList();
    for (const auto& item : list) {
      const c10::ArrayRef<c10::IValue> f = item.get().toTupleRef().elements().asArrayRef();
      const std::string kind = f[0].toStringRef(), fqn = f[1].toStringRef();
      if (!paths.count(fqn)) {
        order.push_back(fqn);
        Path path;
        for (const auto& p : f[2].toList()) path.push_back(p.get());
        paths[fqn] = path;
      }
      StorageRecord rec{fqn, std::nullopt, distcp_file_name(static_cast<int64_t>(r)), 0, 0};
      if (kind == "b") {
        rec.offset = f[3].toInt();
        rec.length = f[4].toInt();
        storage.push_back(rec);
        continue;
      }
      TensorInfo& info = tensors[fqn];
      info.dtype = f[3].toStringRef();
      info.size = int_vector(f[4]);
      if (f[8].toInt() < 0) continue;  // this rank holds none of it
      info.chunks.emplace_back(int_vector(f[5]), int_vector(f[6]));
      rec.offsets = int_vector(f[5]);
      rec.offset = f[7].toInt();
      rec.length = f[8].toInt();
      storage.push_back(rec);
    }
  }
  const std::string pickle = detail::dcp_metadata_pickle(order, tensors, paths, storage);
  write_file_atomically((fs::path(dir) / kMetadataFile).string(), std::vector<char>(pickle.begin(), pickle.end()));
}

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

}  // namespace

c10::IValue read_distributed_checkpoint(const std::string& dir, const PartsWanted& wanted,
                                        std::vector<ShardedEntry>& parts) {
  const fs::path meta_path = fs::path(dir) / kMetadataFile;
  std::error_code ec;
  if (!fs::is_regular_file(meta_path, ec)) {
    throw CheckpointError("sharded checkpoint '" + dir +
                          "' has no .metadata: the save that made it did not finish (or it is not a checkpoint)");
  }
  c10::IValue metadata;
  try {
    std::ifstream in(meta_path, std::ios::binary);
    const std::string program((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    metadata = detail::unpickle_python_bytes(program);
  } catch (const std::exception& e) {
    throw CheckpointError("sharded checkpoint '" + dir + "': its .metadata cannot be read: " + brief_error(e, 200));
  }
  if (detail::python_object_name(metadata) != std::string(kDcpMetadataModule) + ".Metadata")
    throw CheckpointError("sharded checkpoint '" + dir + "': .metadata does not hold a DCP Metadata");
  const Dict md = state_field(metadata, "state_dict_metadata", "Metadata").toGenericDict();
  const c10::IValue planner = detail::python_object_state(metadata).toGenericDict().at("planner_data");
  std::map<std::pair<std::string, std::vector<int64_t>>, Location> chunks;
  std::map<std::string, Location> values;
  const Dict storage_data = state_field(metadata, "storage_data", "Metadata").toGenericDict();
  if (!storage_data.contains("__python_items__"))
    throw CheckpointError("sharded checkpoint '" + dir + "': its .metadata lists no stored data");
  for (const auto& item : storage_data.at("__python_items__").toList()) {
    const auto& kv = item.get().toTupleRef().elements();
    const auto [fqn, offset] = index_key(kv.at(0));
    const c10::IValue& info = kv.at(1);
    const Dict st = detail::python_object_state(info).toGenericDict();
    if (st.contains("transform_descriptors") && !st.at("transform_descriptors").isNone() &&
        !st.at("transform_descriptors").toList().empty()) {
      throw CheckpointError("sharded checkpoint '" + dir + "': '" + fqn +
                            "' is stored through stream transforms (compression), which are not supported");
    }
    Location loc{st.at("relative_path").toStringRef(), st.at("offset").toInt(), st.at("length").toInt()};
    if (offset)
      chunks[{fqn, *offset}] = loc;
    else
      values[fqn] = loc;
  }
  std::map<std::string, std::ifstream> files;
  const auto read_blob = [&](const Location& loc, const std::string& fqn) {
    auto it = files.find(loc.file);
    if (it == files.end()) {
      it = files.emplace(loc.file, std::ifstream(fs::path(dir) / loc.file, std::ios::binary)).first;
      if (!it->second)
        throw CheckpointError("sharded checkpoint '" + dir + "': its file '" + loc.file + "' is missing");
    }
    std::string bytes(static_cast<size_t>(loc.length), '\0');
    it->second.clear();
    it->second.seekg(loc.offset);
    it->second.read(bytes.data(), loc.length);
    if (it->second.gcount() != loc.length) {
      throw CheckpointError("sharded checkpoint '" + dir + "': '" + loc.file + "' is truncated (the bytes of '" + fqn +
                            "' end early)");
    }
    try {
      return detail::unpickle_bytes(bytes);
    } catch (const std::exception& e) {
      throw CheckpointError("sharded checkpoint '" + dir + "': the bytes of '" + fqn + "' in '" + loc.file +
                            "' are damaged: " + brief_error(e, 200));
    }
  };
  Node root;
  for (const auto& e : md) {
    const std::string fqn = e.key().toStringRef();
    Path path;
    if (planner.isGenericDict() && planner.toGenericDict().contains(fqn)) {
      for (const auto& p : planner.toGenericDict().at(fqn).toTupleRef().elements()) path.push_back(p);
    } else {
      std::stringstream ss(fqn);
      for (std::string part; std::getline(ss, part, '.');) path.emplace_back(part);
    }
    c10::IValue value;
    const std::string kind = detail::python_object_name(e.value());
    if (kind == std::string(kDcpMetadataModule) + ".BytesStorageMetadata") {
      const auto loc = values.find(fqn);
      if (loc == values.end()) throw CheckpointError("sharded checkpoint '" + dir + "': no data for '" + fqn + "'");
      value = read_blob(loc->second, fqn);
    } else if (kind == std::string(kDcpMetadataModule) + ".TensorStorageMetadata") {
      const auto props = detail::python_object_state(state_field(e.value(), "properties", fqn));
      const auto& fields = props.toTupleRef().elements();
      const std::string dtype_global = fields.at(0).toGenericDict().begin()->value().toStringRef();
      const at::ScalarType dtype = dtype_from_name(dtype_global, fqn);
      const std::vector<int64_t> shape = int_vector(state_field(e.value(), "size", fqn));
      // This rank's range of it, when it reads the tensor only in part.
      std::optional<std::pair<int64_t, int64_t>> range;
      std::vector<std::string> in_state;
      if (wanted && path.size() > 1 && path.front().isString() && path.front().toStringRef() == "state") {
        for (size_t i = 1; i < path.size(); ++i)
          in_state.push_back(path[i].isString() ? path[i].toStringRef() : std::to_string(path[i].toInt()));
        range = wanted(in_state, shape);
      }
      const at::Tensor whole = range ? at::Tensor() : at::zeros(shape, dtype);
      at::Tensor part = range ? at::zeros({range->second - range->first}, dtype) : at::Tensor();
      int64_t covered = 0;
      for (const auto& c : state_field(e.value(), "chunks", fqn).toList()) {
        const std::vector<int64_t> offsets = int_vector(state_field(c.get(), "offsets", fqn));
        const std::vector<int64_t> sizes = int_vector(state_field(c.get(), "sizes", fqn));
        if (range) {  // a box's first and last elements bound its range of the flattening
          std::vector<int64_t> last = offsets;
          bool empty = false;
          for (size_t d = 0; d < last.size(); ++d) {
            last[d] += sizes[d] - 1;
            empty = empty || sizes[d] == 0;
          }
          if (empty || flat_index(shape, last) < range->first || flat_index(shape, offsets) >= range->second) continue;
        }
        const auto loc = chunks.find({fqn, offsets});
        if (loc == chunks.end())
          throw CheckpointError("sharded checkpoint '" + dir + "': a chunk of '" + fqn + "' is missing");
        const c10::IValue t = read_blob(loc->second, fqn);
        if (!t.isTensor() || t.toTensor().sizes() != c10::IntArrayRef(sizes))
          throw CheckpointError("sharded checkpoint '" + dir + "': a chunk of '" + fqn + "' has the wrong shape");
        if (range) {
          covered += copy_overlap(t.toTensor(), offsets, shape, range->first, part);
          continue;
        }
        at::Tensor target = whole;
        for (size_t d = 0; d < offsets.size(); ++d)
          target = target.narrow(static_cast<int64_t>(d), offsets[d], sizes[d]);
        target.copy_(t.toTensor());
      }
      if (range) {
        if (covered != part.numel()) {
          throw CheckpointError("sharded checkpoint '" + dir + "': the chunks of '" + fqn + "' hold " +
                                std::to_string(covered) + " of the " + std::to_string(part.numel()) +
                                " elements this rank needs");
        }
        dist::LocalPart local;
        local.shape = shape;
        local.dtype = dtype;
        local.begin = range->first;
        local.end = range->second;
        local.values = part;
        parts.push_back({in_state, std::move(local)});
        Node* n = &root;  // its dict stays, even when all its entries are read in part
        for (size_t i = 0; i + 1 < path.size(); ++i) n = &n->child(path[i]);
        continue;
      }
      value = whole;
    } else {
      throw CheckpointError("sharded checkpoint '" + dir + "': '" + fqn + "' has unknown storage metadata " + kind);
    }
    Node* n = &root;
    for (const auto& p : path) n = &n->child(p);
    n->leaf = value;
  }
  c10::IValue payload = root.value();
  if (!payload.isGenericDict() || !payload.toGenericDict().contains("state") ||
      !payload.toGenericDict().at("state").isGenericDict())
    throw CheckpointError("sharded checkpoint '" + dir + "' is not a Composer checkpoint (no 'state' dict)");
  return payload;
}

c10::IValue read_distributed_checkpoint(const std::string& dir) {
  std::vector<ShardedEntry> parts;
  return read_distributed_checkpoint(dir, PartsWanted(), parts);
}

}  // namespace composer
