#include "composer/checkpoint/distributed_checkpoint.h"

#include "checkpoint/detail/background_write.h"
#include "checkpoint/detail/part_boxes.h"
#include "checkpoint/detail/sharded_write.h"
#include "composer/checkpoint/checkpoint.h"
#include "composer/checkpoint/state_codec.h"
#include "composer/core/serialization.h"
#include "composer/core/state.h"
#include "composer/dist/dist.h"
#include "composer/dist/env.h"
#include "composer/utils/atomic_file.h"
#include "composer/utils/error_text.h"
#include "formats/detail/dcp_metadata.h"
#include "formats/detail/pickle_io.h"
#include "formats/detail/python_pickle.h"
#include "utils/detail/text_file.h"

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

using detail::dtype_name;
using detail::int_vector;
using detail::kDcpMetadataModule;
using detail::kMetadataFile;
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

namespace {

// What one rank saves: the "state" as it holds it (and, unless weights_only, the "rng"), with `sharded` its parts of
// the tensors it holds only in part.
Dict rank_payload(const State& state, bool weights_only, const std::optional<c10::IValue>& rng,
                  std::vector<ShardedEntry>& sharded) {
  Dict top = new_dict();
  const Dict local = local_state_dict(state, sharded).toGenericDict();
  if (!weights_only) {
    top.insert("state", local);
    top.insert("rng", rng ? *rng : gather_rng_states());
    return top;
  }
  Dict slim = new_dict();
  for (const char* key : {"model", "metadata"})
    if (local.contains(key)) slim.insert(key, local.at(key));
  top.insert("state", slim);
  std::vector<ShardedEntry> model_only;
  for (auto& e : sharded)
    if (e.path.front() == "model") model_only.push_back(std::move(e));
  sharded = std::move(model_only);
  return top;
}

// A record of a tensor chunk: ("t", fqn, path, dtype, whole shape, chunk offsets, chunk sizes, byte offset, length);
// length -1 for a tensor of which the rank holds nothing.
c10::IValue tensor_record(const Path& path, const std::string& dtype, const std::vector<int64_t>& shape,
                          const std::vector<int64_t>& offsets, const std::vector<int64_t>& sizes, int64_t offset,
                          int64_t length) {
  return c10::ivalue::Tuple::create({std::string("t"), join_fqn(path), path_ivalue(path), dtype, int_list(shape),
                                     int_list(offsets), int_list(sizes), offset, length});
}

// Writes this rank's file of `dir`: the chunks of its parts, and on rank 0 the whole tensors and other values
// (`leaves`); returns the records of what went where.
Records write_rank_file(const std::string& dir, int64_t rank, const std::vector<ShardedEntry>& sharded,
                        const std::vector<std::pair<Path, c10::IValue>>& leaves) {
  Records records(c10::AnyType::get());
  write_file_atomically((fs::path(dir) / distcp_file_name(rank)).string(), [&](const ByteSink& sink) {
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
      const dist::LocalPart& part = e.part;
      const std::string dtype = dtype_name(part.dtype);
      const std::vector<detail::PlacedBox> pieces = detail::placed_boxes(part.shape, part.begin, part.end, part.piece);
      if (pieces.empty()) records.push_back(tensor_record(path, dtype, part.shape, {}, {}, 0, -1));
      for (const detail::PlacedBox& b : pieces) {
        const std::string bytes = blob(detail::box_view(part.values, part.begin, b).clone());
        const int64_t offset = put(bytes);
        records.push_back(
            tensor_record(path, dtype, part.shape, b.offsets, b.sizes, offset, static_cast<int64_t>(bytes.size())));
      }
    }
    if (rank != 0) return;  // the replicated tensors and the other values: rank 0's
    for (const auto& [path, value] : leaves) {
      if (value.isTensor()) {
        const at::Tensor t = value.toTensor().detach().to(at::kCPU).contiguous().clone();
        const std::vector<int64_t> shape = t.sizes().vec();
        const std::string bytes = blob(t);
        const int64_t offset = put(bytes);
        records.push_back(tensor_record(path, dtype_name(t.scalar_type()), shape, std::vector<int64_t>(shape.size(), 0),
                                        shape, offset, static_cast<int64_t>(bytes.size())));
      } else {
        const std::string bytes = blob(value);
        const int64_t offset = put(bytes);
        records.push_back(c10::ivalue::Tuple::create(
            {std::string("b"), join_fqn(path), path_ivalue(path), offset, static_cast<int64_t>(bytes.size())}));
      }
    }
  });
  return records;
}

// Rank 0: the metadata file of `dir` from every rank's records (pickled, by rank).
void write_metadata(const std::string& dir, const std::vector<std::string>& all) {
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
  composer::detail::write_text_atomically((fs::path(dir) / kMetadataFile).string(), pickle);
}

}  // namespace

namespace detail {

struct PreparedRankFile {
  std::vector<ShardedEntry> sharded;                 // this rank's parts
  std::vector<std::pair<Path, c10::IValue>> leaves;  // rank 0: the whole tensors and the other values
};

std::shared_ptr<const PreparedRankFile> prepare_rank_file(const State& state, bool weights_only,
                                                          const std::optional<c10::IValue>& rng, bool copy) {
  auto prepared = std::make_shared<PreparedRankFile>();
  const Dict top = rank_payload(state, weights_only, rng, prepared->sharded);
  if (dist::get_global_rank() == 0) flatten(top, {}, prepared->leaves);  // only rank 0 writes them
  if (copy) {
    for (auto& e : prepared->sharded) e.part.values = host_copy(e.part.values).toTensor();
    for (auto& leaf : prepared->leaves) leaf.second = host_copy(leaf.second);
  }
  return prepared;
}

std::string write_prepared_rank_file(const PreparedRankFile& prepared, const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw std::runtime_error("sharded checkpoint: cannot create '" + dir + "': " + ec.message());
  const Records records = write_rank_file(dir, dist::get_global_rank(), prepared.sharded, prepared.leaves);
  const std::vector<char> bytes = torch::pickle_save(records);
  return std::string(bytes.begin(), bytes.end());
}

void finish_rank_files(const std::string& dir, const std::string& records, const std::string& error) {
  // Every rank's file is complete (renamed into place) before rank 0 hears its records; the metadata goes last. A
  // rank that failed sends its error instead, so that no rank waits for it.
  const std::vector<std::string> all = dist::all_gather_object(error.empty() ? "R" + records : "E" + error);
  std::vector<std::string> parts;
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r].empty() || all[r][0] != 'R')
      throw std::runtime_error("sharded checkpoint '" + dir + "': rank " + std::to_string(r) +
                               " could not write its file: " + (all[r].empty() ? "" : all[r].substr(1)));
    parts.push_back(all[r].substr(1));
  }
  if (dist::get_global_rank() == 0) write_metadata(dir, parts);
}

}  // namespace detail

void save_distributed_checkpoint(const State& state, const std::string& dir, bool weights_only,
                                 const std::optional<c10::IValue>& rng) {
  const auto prepared = detail::prepare_rank_file(state, weights_only, rng, /*copy=*/false);
  std::string records, error;
  try {
    records = detail::write_prepared_rank_file(*prepared, dir);
  } catch (const std::exception& e) {
    error = e.what();
  }
  detail::finish_rank_files(dir, records, error);
}

}  // namespace composer
