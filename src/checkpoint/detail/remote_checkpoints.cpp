#include "checkpoint/detail/remote_checkpoints.h"

#include "checkpoint/detail/dcp_files.h"
#include "checkpoint/detail/file_parts.h"
#include "composer/dist/dist.h"
#include "composer/utils/error_text.h"
#include "formats/detail/zip_verify.h"

#include "composer/checkpoint/checkpoint.h"
#include "composer/checkpoint/checkpoint_saver.h"
#include "composer/checkpoint/distributed_checkpoint.h"
#include "composer/core/format_name.h"
#include "composer/core/state.h"
#include "composer/storage/object_store.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <sstream>

namespace composer::detail {

namespace fs = std::filesystem;

namespace {

/// Removes a downloaded file and, when it is empty, its per-process folder.
void remove_download(const std::string& local) {
  std::error_code ec;
  fs::remove(local, ec);
  fs::remove(fs::path(local).parent_path(), ec);  // fails, harmlessly, while another download uses it
}

/// A fresh temporary path for a download (this process, this call).
std::string download_path(const std::string& name) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  const fs::path dir = fs::temp_directory_path() / ("composer-download-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return (dir / (std::to_string(rng() % 1000000000) + "-" + fs::path(name).filename().string())).string();
}

}  // namespace

std::string folder_prefix(const std::string& folder) { return folder.empty() ? "" : folder + "/"; }

std::vector<std::string> checkpoint_names_in_folder(ObjectStore& store, const std::string& prefix) {
  std::vector<std::string> names;
  for (const auto& object : store.list_objects(prefix)) {
    const std::string rest = object.name.substr(prefix.size());
    const auto slash = rest.find('/');
    if (slash == std::string::npos)
      names.push_back(rest);  // an object directly in the folder
    else if (rest.substr(slash) == "/.metadata")
      names.push_back(rest.substr(0, slash));  // a complete sharded checkpoint
  }
  return names;
}

namespace {

/// A sharded checkpoint in an object store (the objects under `key`/, .metadata among them), read as a local one:
/// each object is downloaded into a temporary folder just before it is first read, so a rank fetches only the
/// .metadata and the files that hold its parts and the stored values (not the other ranks' files); then removed.
// Ranged reads of an object with a read-ahead window: the pieces a rank reads lie mostly one after another (the
// chunks of a sharded checkpoint's file, the records of a full one), so small ones come several to a request; a read
// larger than the window is one request.
class RangeReader {
 public:
  static constexpr int64_t kWindow = 4 << 20;
  explicit RangeReader(ObjectStore& store) : store_(store) {}
  std::string read(const std::string& object, int64_t offset, int64_t length) {
    Window& w = windows_[object];  // one per object: a rank's reads alternate between a checkpoint's files
    if (offset < w.start || offset + length > w.start + static_cast<int64_t>(w.bytes.size())) {
      const int64_t want = std::max(length, std::min(kWindow, size(object) - offset));
      w.bytes = store_.read_range(object, offset, want);
      w.start = offset;
    }
    return w.bytes.substr(static_cast<size_t>(offset - w.start), static_cast<size_t>(length));
  }
  int64_t size(const std::string& object) {
    auto it = sizes_.find(object);
    if (it == sizes_.end()) it = sizes_.emplace(object, store_.get_object_size(object)).first;
    return it->second;
  }

 private:
  struct Window {
    int64_t start = 0;
    std::string bytes;
  };
  ObjectStore& store_;
  std::map<std::string, int64_t> sizes_;
  std::map<std::string, Window> windows_;
};

// A full checkpoint (one torch.save object) read by parts through ranged reads, without downloading it: this rank's
// share of the CRC-32 checks, the pickle, and its parts of the tensors it holds in part (checkpoint.cpp's
// read_by_parts, from the store). None when the object is absent (a sharded checkpoint's folder) or the reader by
// parts cannot take it (then it is downloaded and read as before).
std::optional<c10::IValue> read_remote_file_parts(ObjectStore& store, const std::string& source, const std::string& key,
                                                  const PartsWanted& wanted, std::vector<ShardedEntry>& parts) {
  RangeReader ranges(store);
  ByteSource bytes;
  try {
    bytes.size = static_cast<uint64_t>(ranges.size(key));
  } catch (const ObjectNotFoundError&) {
    return std::nullopt;
  } catch (const ObjectStoreError& e) {
    throw CheckpointError(std::string("cannot load checkpoint: ") + e.what());
  }
  bytes.read = [&](uint64_t offset, void* dst, uint64_t n) {
    const std::string got = ranges.read(key, static_cast<int64_t>(offset), static_cast<int64_t>(n));
    if (got.size() != n) throw std::runtime_error("the object ended early");
    std::memcpy(dst, got.data(), n);
  };
  std::optional<ZipArchive> zip;  // its directory read once, for the checks and the parts
  try {
    zip.emplace(bytes);
    zip->verify(dist::get_global_rank(), dist::get_world_size());
  } catch (const ObjectStoreError& e) {
    throw CheckpointError(std::string("cannot load checkpoint: ") + e.what());
  } catch (const std::exception& e) {
    throw CheckpointError("checkpoint " + source + " is corrupt or truncated (" + std::to_string(bytes.size) +
                          " bytes): " + brief_error(e, 200));
  }
  try {
    std::vector<ShardedEntry> read;
    c10::IValue payload = read_file_parts(*zip, wanted, read);
    if (!payload.isGenericDict() || !payload.toGenericDict().contains("state")) return std::nullopt;
    parts.insert(parts.end(), read.begin(), read.end());
    return payload;
  } catch (const ObjectStoreError& e) {
    throw CheckpointError(std::string("cannot load checkpoint: ") + e.what());
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

c10::IValue read_remote_sharded(ObjectStore& store, const std::string& source, const std::string& key,
                                const PartsWanted& wanted, std::vector<ShardedEntry>& parts) {
  const std::string dir = download_path(key);
  auto remove_dir = [&] {
    std::error_code ec;
    fs::remove_all(dir, ec);
    fs::remove(fs::path(dir).parent_path(), ec);
  };
  c10::IValue payload;
  try {
    fs::create_directories(dir);
    // The .metadata whole; of the data files only the chunks this rank reads, where the store reads ranges.
    DcpFiles files;
    files.fetch = [&](const std::string& name) {
      store.download_object(key + "/" + name, (fs::path(dir) / name).string(), true);
    };
    RangeReader ranges(store);
    if (store.reads_ranges()) {
      files.read = [&](const std::string& name, int64_t offset, int64_t length) {
        return ranges.read(key + "/" + name, offset, length);
      };
    }
    payload = read_distributed_checkpoint(dir, wanted, parts, files);
  } catch (const ObjectStoreError& e) {
    remove_dir();
    throw CheckpointError(std::string("cannot load sharded checkpoint ") + source + ": " + e.what());
  } catch (const CheckpointError& e) {
    remove_dir();
    throw CheckpointError(source + " (downloaded): " + e.what());
  }
  remove_dir();
  return payload;
}

}  // namespace

c10::IValue read_checkpoint_from(const std::string& source) {
  std::vector<ShardedEntry> parts;
  return read_checkpoint_from(source, PartsWanted(), parts);
}

c10::IValue read_checkpoint_from(const std::string& source, const PartsWanted& wanted,
                                 std::vector<ShardedEntry>& parts) {
  if (!is_object_store_uri(source)) return read_checkpoint(source, wanted, parts);
  std::unique_ptr<ObjectStore> store;
  try {
    store = make_object_store(source);
  } catch (const std::invalid_argument& e) {
    throw CheckpointError(std::string("checkpoint ") + e.what());
  }
  std::string key = parse_uri(source).path;
  while (!key.empty() && key.back() == '/') key.pop_back();
  if (wanted && store->reads_ranges()) {
    if (auto payload = read_remote_file_parts(*store, source, key, wanted, parts)) return *payload;
  }
  const std::string local = download_path(key);
  try {
    store->download_object(key, local, true);
  } catch (const ObjectNotFoundError& e) {
    remove_download(local);
    // No object of that name: a sharded checkpoint is a folder of objects, complete once its .metadata is there.
    std::vector<ObjectInfo> inside;
    try {
      inside = store->list_objects(key + "/");
    } catch (const ObjectStoreError&) {
    }
    if (inside.empty()) throw CheckpointError(std::string("cannot load checkpoint: ") + e.what());
    for (const auto& object : inside)
      if (object.name == key + "/.metadata") return read_remote_sharded(*store, source, key, wanted, parts);
    throw CheckpointError("sharded checkpoint " + source +
                          " has no .metadata: the save that made it did not finish (or its upload did not)");
  } catch (const ObjectStoreError& e) {
    remove_download(local);
    throw CheckpointError(std::string("cannot load checkpoint: ") + e.what());
  }
  c10::IValue payload;
  try {
    payload = read_checkpoint(local, wanted, parts);
  } catch (const CheckpointError& e) {
    remove_download(local);
    // The message names the downloaded copy; name the object too.
    throw CheckpointError(source + " (downloaded): " + e.what());
  }
  remove_download(local);
  return payload;
}

std::vector<std::string> remote_checkpoint_candidates(const std::string& folder_uri, const std::string& filename,
                                                      const std::string& latest_filename, const State& state) {
  auto store = make_object_store(folder_uri);
  const std::string prefix = folder_prefix(format_name(parse_uri(folder_uri).path, state));
  const std::vector<std::string> names = checkpoint_names_in_folder(*store, prefix);
  std::vector<std::string> out;
  for (const auto& [count, name] : match_checkpoint_names(names, filename, state))
    out.push_back(store->get_uri(prefix + name));
  if (!latest_filename.empty()) {
    const std::string pointer = prefix + format_name(latest_filename, state) + ".symlink";
    if (std::find(names.begin(), names.end(), pointer.substr(prefix.size())) != names.end()) {
      const std::string local = download_path(pointer);
      store->download_object(pointer, local, true);
      std::ifstream in(local);
      std::stringstream target;
      target << in.rdbuf();
      remove_download(local);
      const std::string uri = store->get_uri(target.str());
      if (!target.str().empty() && std::find(out.begin(), out.end(), uri) == out.end()) out.push_back(uri);
    }
  }
  return out;
}

}  // namespace composer::detail
