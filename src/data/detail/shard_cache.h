// ShardCache: the local copy of a StreamingDataset's shards. It downloads the index and each shard from the remote
// on first use (or ahead of it, in this rank's order: predownload), decompresses and checks them against the index
// (size, validate_hash), maps them, and under a cache_limit evicts the node's least recently read shards, with file
// locks so that the ranks sharing `local` neither fetch a shard twice nor evict one another rank is opening.
// StreamingDataset keeps the sample order and the decoding.
#pragma once

#include "composer/data/streaming_dataset.h"

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace composer {
class ObjectStore;
}

namespace composer::detail {

struct MdsShard;
class MappedFile;

class ShardCache {
 public:
  explicit ShardCache(StreamingDatasetOptions options);
  ~ShardCache();
  /// The local index.json, downloaded from the remote first when there is one; std::invalid_argument when the
  /// remote cannot give it.
  std::string index();
  /// The shards the index lists (before any file() or prefetch()); creates the node's lock folder.
  void attach(std::vector<std::shared_ptr<MdsShard>> shards);
  /// The shard, mapped; fetched (downloaded, decompressed, checked) first if needed. Thread-safe.
  std::shared_ptr<const MappedFile> file(int64_t shard) const;
  /// Fetch these shards ahead, in this order, as the readers reach them (no-op without a remote or predownload).
  void prefetch(std::vector<int64_t> shards) const;
  /// Where a file of the split is kept locally.
  std::string local_path(const std::string& basename) const;

 private:
  struct Prefetcher;
  void fetch(int64_t shard) const;
  /// With a cache_limit: deletes the node's least recently read shards (never `keep`, nor one a rank is fetching)
  /// until the cache holds at most cache_limit - incoming bytes.
  void evict_if_needed(int64_t keep, int64_t incoming = 0) const;
  /// Marks a shard read now (its file time; the eviction order), at most every 0.1 s. Holds mutex_.
  void touch(int64_t shard) const;
  /// Where a shard file is in the remote store.
  std::string remote_name(const std::string& basename) const;
  /// The lock file of a shard (its basename) or of the cache ("cache"), shared by the ranks of a node.
  std::string lock_path(const std::string& name) const;

  StreamingDatasetOptions options_;
  std::unique_ptr<ObjectStore> store_;  // the remote's, when there is one
  std::vector<std::shared_ptr<MdsShard>> shards_;
  mutable std::mutex mutex_;
  mutable std::vector<std::shared_ptr<const MappedFile>> mapped_;
  mutable std::vector<std::unique_ptr<std::mutex>> shard_locks_;  // one fetch of a shard at a time
  mutable std::vector<int64_t> touched_ms_;                       // when touch() last set a shard's file time
  mutable std::unique_ptr<Prefetcher> prefetcher_;
};

}  // namespace composer::detail
