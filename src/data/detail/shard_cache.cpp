// The shard cache of a StreamingDataset: shards fetched from the remote (and decompressed) into `local` on first use
// or ahead of it, checked against the index, mapped, and evicted least recently read first under a cache_limit
// shared by the ranks of a node (file locks).
#include "data/detail/shard_cache.h"

#include "composer/storage/object_store.h"
#include "data/detail/file_lock.h"
#include "data/detail/mds.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <thread>

namespace composer::detail {

namespace fs = std::filesystem;

namespace {

/// Shards fetched ahead: predownload, and with a cache_limit no more than fit in the cache beside the one read.
int64_t prefetch_depth(const StreamingDatasetOptions& o, const std::vector<std::shared_ptr<MdsShard>>& shards) {
  if (o.cache_limit() <= 0) return o.predownload();
  int64_t largest = 1;
  for (const auto& s : shards) largest = std::max(largest, s->raw.bytes);
  return std::min(o.predownload(), std::max<int64_t>(0, o.cache_limit() / largest - 1));
}

/// Why `path` does not hold `f` ("" when it does): missing, its size, then its digest when `algo` is set and listed.
std::string damage(const std::string& path, const MdsFile& f, const std::string& algo) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (ec) return "is missing";
  if (static_cast<int64_t>(size) != f.bytes)
    return "has " + std::to_string(size) + " bytes; the index says " + std::to_string(f.bytes);
  if (!algo.empty() && f.hashes.count(algo) && file_digest(path, algo) != f.hashes.at(algo))
    return "fails its " + algo + " check (damaged)";
  return "";
}

}  // namespace

// Fetches the shards of this rank's order ahead of use: `target` moves forward as the readers reach new shards.
struct ShardCache::Prefetcher {
  std::mutex mu;
  std::condition_variable wake;
  std::vector<int64_t> order;
  int64_t done = 0, target = 0, depth = 0;
  bool stop = false;
  std::thread thread;
  /// A reader reached `shard`: fetch up to `depth` shards past it.
  void advance(int64_t shard) {
    {
      std::lock_guard<std::mutex> lock(mu);
      const auto pos = std::find(order.begin(), order.end(), shard) - order.begin();
      target = std::max<int64_t>(target, pos + 1 + depth);
    }
    wake.notify_all();
  }
};

ShardCache::ShardCache(StreamingDatasetOptions options) : options_(std::move(options)) {}

ShardCache::~ShardCache() {
  if (!prefetcher_) return;
  {
    std::lock_guard<std::mutex> lock(prefetcher_->mu);
    prefetcher_->stop = true;
  }
  prefetcher_->wake.notify_all();
  prefetcher_->thread.join();
}

std::string ShardCache::index() {
  const std::string path = local_path("index.json");
  if (options_.remote().empty()) return path;
  try {
    store_ = make_object_store(options_.remote());  // one for every download (thread-safe)
    store_->download_object(remote_name("index.json"), path, true);
  } catch (const ObjectStoreError& e) {
    throw std::invalid_argument(std::string("StreamingDataset: cannot read the index: ") + e.what());
  }
  return path;
}

void ShardCache::attach(std::vector<std::shared_ptr<MdsShard>> shards) {
  shards_ = std::move(shards);
  mapped_.resize(shards_.size());
  touched_ms_.assign(shards_.size(), -1);
  if (!options_.remote().empty()) {
    std::error_code ec;
    fs::create_directories(local_path(".locks"), ec);
    if (ec)
      throw std::invalid_argument("StreamingDataset: local = '" + options_.local() +
                                  "': cannot create its lock folder: " + ec.message());
  }
  for (size_t i = 0; i < shards_.size(); ++i) shard_locks_.push_back(std::make_unique<std::mutex>());
}

std::string ShardCache::lock_path(const std::string& name) const { return local_path(".locks/" + name + ".lock"); }

std::string ShardCache::local_path(const std::string& basename) const {
  return (fs::path(options_.local()) / options_.split() / basename).string();
}

std::string ShardCache::remote_name(const std::string& basename) const {
  std::string path = parse_uri(options_.remote()).path;
  if (!path.empty() && path.back() != '/') path += '/';
  if (!options_.split().empty()) path += options_.split() + "/";
  return path + basename;
}

void ShardCache::fetch(int64_t shard) const {
  const MdsShard& s = *shards_[static_cast<size_t>(shard)];
  const std::string raw = local_path(s.raw.basename);
  const std::string& algo = options_.validate_hash();
  const bool zipped = !s.compression.empty(), remote = !options_.remote().empty();
  std::error_code ec;
  if (fs::exists(raw, ec)) {
    // A shard already here is checked as a fetched one is (Streaming checks only what it downloads or decompresses).
    const std::string why = damage(raw, s.raw, algo);
    if (why.empty()) return;
    if (!remote && !(zipped && fs::exists(local_path(s.zip.basename), ec)))
      throw std::runtime_error("StreamingDataset: shard '" + raw + "' " + why +
                               "; kept, as it is the only copy (no remote, no compressed file to read it again from)");
    fs::remove(raw, ec);  // read again below, from the remote or the compressed file
  }
  const MdsFile& wanted = zipped ? s.zip : s.raw;
  const std::string local = local_path(wanted.basename);
  if (remote && damage(local, wanted, "") != "") {
    evict_if_needed(shard, wanted.bytes + (zipped ? s.raw.bytes : 0));  // room first, as Streaming makes it
    for (int64_t attempt = 1;; ++attempt) {
      try {
        store_->download_object(remote_name(wanted.basename), local, true);
        break;
      } catch (const ObjectStoreTransientError&) {
        if (attempt >= options_.download_retry()) throw;
      }
    }
  }
  if (const std::string why = damage(local, wanted, algo); !why.empty()) {
    if (!remote)  // the only copy: never deleted
      throw std::runtime_error(
          "StreamingDataset: shard '" + local + "' " + why +
          (why == "is missing" ? " and there is no remote to fetch it" : "; kept, as it is the only copy"));
    fs::remove(local, ec);  // never keep a damaged download in the cache
    throw std::runtime_error("StreamingDataset: shard '" + local + "' " + why +
                             "; removed from the cache (read again from '" + options_.remote() + "' next time)");
  }
  if (zipped) {
    zstd_decompress_file(local, raw);
    if (const std::string why = damage(raw, s.raw, algo); !why.empty()) {
      fs::remove(raw, ec);  // made from the compressed file, which stays
      throw std::runtime_error("StreamingDataset: shard '" + raw + "', decompressed from '" + local + "', " + why);
    }
    // Without a remote the compressed file is the only copy: kept, as Streaming keeps it (safe_keep_zip).
    if (!options_.keep_zip() && remote) fs::remove(local, ec);
  }
}

void ShardCache::evict_if_needed(int64_t keep, int64_t incoming) const {
  if (options_.cache_limit() <= 0) return;
  // The cache is the node's: what every rank sharing `local` holds counts, the least recently read shards (file
  // times, which readers refresh) go first, and a shard a rank is fetching or opening (its lock held) is skipped.
  FileLock one_eviction_at_a_time(lock_path("cache"));
  struct Present {
    int64_t shard, bytes;
    fs::file_time_type used;
  };
  std::vector<Present> present;
  int64_t used = 0;
  std::error_code ec;
  for (size_t i = 0; i < shards_.size(); ++i) {
    int64_t bytes = 0;
    fs::file_time_type when = fs::file_time_type::max();
    for (const auto* f : {&shards_[i]->raw, &shards_[i]->zip}) {
      if (f->basename.empty()) continue;
      const std::string path = local_path(f->basename);
      const auto size = fs::file_size(path, ec);
      if (ec) continue;
      bytes += static_cast<int64_t>(size);
      when = std::min(when, fs::last_write_time(path, ec));
    }
    if (bytes > 0) present.push_back({static_cast<int64_t>(i), bytes, when});
    used += bytes;
  }
  std::sort(present.begin(), present.end(), [](const Present& a, const Present& b) { return a.used < b.used; });
  std::vector<int64_t> evicted;
  for (const Present& p : present) {
    if (used + incoming <= options_.cache_limit()) break;
    if (p.shard == keep) continue;
    const MdsShard& s = *shards_[static_cast<size_t>(p.shard)];
    FileLock busy(lock_path(s.raw.basename), /*wait=*/false);
    if (!busy.held()) continue;
    fs::remove(local_path(s.raw.basename), ec);
    if (!s.zip.basename.empty()) fs::remove(local_path(s.zip.basename), ec);
    used -= p.bytes;
    evicted.push_back(p.shard);
  }
  // Drop this process's maps of evicted shards (readers holding one keep it until they finish), and of shards
  // another rank evicted, so their memory and disk space are given back.
  std::lock_guard<std::mutex> lock(mutex_);
  for (size_t i = 0; i < mapped_.size(); ++i)
    if (mapped_[i] && static_cast<int64_t>(i) != keep &&
        (std::find(evicted.begin(), evicted.end(), static_cast<int64_t>(i)) != evicted.end() ||
         !fs::exists(local_path(shards_[i]->raw.basename), ec)))
      mapped_[i].reset();
}

void ShardCache::touch(int64_t shard) const {
  if (options_.cache_limit() <= 0) return;
  const int64_t now =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count();
  if (touched_ms_[shard] >= 0 && now - touched_ms_[shard] < 100) return;  // a system call per shard per 0.1 s
  touched_ms_[shard] = now;
  std::error_code ec;
  fs::last_write_time(local_path(shards_[shard]->raw.basename), fs::file_time_type::clock::now(), ec);
}

std::shared_ptr<const MappedFile> ShardCache::file(int64_t shard) const {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (mapped_[shard]) {
      touch(shard);
      if (prefetcher_) prefetcher_->advance(shard);
      return mapped_[shard];
    }
  }
  std::shared_ptr<const MappedFile> file;
  {
    // Fetched and mapped under the shard's lock, which every rank on the node takes: no rank evicts it or removes
    // its compressed file in between. A mapping outlives the file's removal.
    std::lock_guard<std::mutex> fetching(*shard_locks_[shard]);
    std::optional<FileLock> on_node;
    if (!options_.remote().empty()) on_node.emplace(lock_path(shards_[shard]->raw.basename));
    fetch(shard);
    const std::string path = local_path(shards_[shard]->raw.basename);
    file = std::make_shared<const MappedFile>(path);
    check_mds_header(*file, shards_[shard]->samples, "StreamingDataset: shard '" + path + "'");
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!mapped_[shard]) mapped_[shard] = file;
    file = mapped_[shard];
    touched_ms_[shard] = -1;
    touch(shard);
  }
  evict_if_needed(shard);
  if (prefetcher_) prefetcher_->advance(shard);
  return file;
}

void ShardCache::prefetch(std::vector<int64_t> shards) const {
  const int64_t depth = prefetch_depth(options_, shards_);
  if (options_.remote().empty() || depth == 0) return;
  if (!prefetcher_) {
    prefetcher_ = std::make_unique<Prefetcher>();
    Prefetcher& p = *prefetcher_;
    p.thread = std::thread([this, &p] {
      std::unique_lock<std::mutex> lock(p.mu);
      while (true) {
        p.wake.wait(lock,
                    [&] { return p.stop || (p.done < p.target && p.done < static_cast<int64_t>(p.order.size())); });
        if (p.stop) return;
        const int64_t shard = p.order[p.done++];
        lock.unlock();
        try {
          std::lock_guard<std::mutex> fetching(*shard_locks_[shard]);
          FileLock on_node(lock_path(shards_[shard]->raw.basename));
          fetch(shard);  // a failure here is left to the reader, which fetches again and reports it
        } catch (const std::exception&) {
        }
        lock.lock();
      }
    });
  }
  std::lock_guard<std::mutex> lock(prefetcher_->mu);
  prefetcher_->order = std::move(shards);
  prefetcher_->done = 0;
  prefetcher_->depth = depth;
  prefetcher_->target = depth;
  prefetcher_->wake.notify_all();
}

}  // namespace composer::detail
