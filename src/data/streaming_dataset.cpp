#include "composer/data/streaming_dataset.h"

#include "composer/dist/env.h"
#include "composer/storage/object_store.h"
#include "data/detail/file_lock.h"
#include "data/detail/mds.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <stdexcept>
#include <thread>

namespace composer {

namespace fs = std::filesystem;

void StreamingDatasetOptions::validate() const {
  auto bad = [](const std::string& field, const std::string& value, const std::string& expected) {
    throw std::invalid_argument("StreamingDataset: " + field + " = " + value + ": expected " + expected);
  };
  if (local_.empty()) bad("local", "''", "a cache folder");
  if (!remote_.empty() && !is_object_store_uri(remote_))
    bad("remote", "'" + remote_ + "'", "an object-store URI (s3://, https://, file://) or empty");
  if (shuffle_block_size_ < 1) bad("shuffle_block_size", std::to_string(shuffle_block_size_), ">= 1");
  if (cache_limit_ < 0) bad("cache_limit", std::to_string(cache_limit_), "bytes >= 0 (0: no limit)");
  if (cache_limit_ > 0 && remote_.empty())
    bad("cache_limit", std::to_string(cache_limit_),
        "0 without a remote (local holds the only copy of the shards; nothing may be evicted from it)");
  if (predownload_ < 0) bad("predownload", std::to_string(predownload_), ">= 0");
  if (download_retry_ < 1) bad("download_retry", std::to_string(download_retry_), ">= 1");
  const std::string h = validate_hash_;
  if (!h.empty() && h != "sha1" && h != "sha224" && h != "sha256" && h != "sha384" && h != "sha512" && h != "md5" &&
      h != "sha3_256")
    bad("validate_hash", "'" + h + "'", "one of sha1, sha224, sha256, sha384, sha512, sha3_256, md5");
}

namespace {

/// Shards fetched ahead: predownload, and with a cache_limit no more than fit in the cache beside the one read.
int64_t prefetch_depth(const StreamingDatasetOptions& o, const std::vector<std::shared_ptr<detail::MdsShard>>& shards) {
  if (o.cache_limit() <= 0) return o.predownload();
  int64_t largest = 1;
  for (const auto& s : shards) largest = std::max(largest, s->raw.bytes);
  return std::min(o.predownload(), std::max<int64_t>(0, o.cache_limit() / largest - 1));
}

}  // namespace

// Fetches the shards of this rank's order ahead of use: `target` moves forward as the readers reach new shards.
struct StreamingDataset::Prefetcher {
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

StreamingDataset::StreamingDataset(StreamingDatasetOptions options) : options_(std::move(options)) {
  options_.validate();
  const std::string index_path = local_path("index.json");
  if (!options_.remote().empty()) {
    try {
      store_ = make_object_store(options_.remote());  // one for every download (thread-safe)
      store_->download_object(remote_name("index.json"), index_path, true);
    } catch (const ObjectStoreError& e) {
      throw std::invalid_argument(std::string("StreamingDataset: cannot read the index: ") + e.what());
    }
  }
  std::ifstream in(index_path);
  if (!in)
    throw std::invalid_argument("StreamingDataset: no index at '" + index_path + "'" +
                                (options_.remote().empty() ? " (and no remote to download it from)" : ""));
  nlohmann::json index;
  try {
    in >> index;
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument("StreamingDataset: '" + index_path + "' is not JSON: " + e.what());
  }
  for (auto& shard : detail::parse_mds_index(index, index_path))
    shards_.push_back(std::make_shared<detail::MdsShard>(std::move(shard)));
  if (shards_.empty()) throw std::invalid_argument("StreamingDataset: '" + index_path + "' lists no shards");
  for (const auto& s : shards_) {
    shard_starts_.push_back(num_samples_);
    num_samples_ += s->samples;
    if (s->columns.size() != shards_[0]->columns.size())
      throw std::invalid_argument("StreamingDataset: '" + index_path + "': the shards have different columns");
    for (size_t c = 0; c < s->columns.size(); ++c)
      if (s->columns[c].name != shards_[0]->columns[c].name ||
          s->columns[c].encoding != shards_[0]->columns[c].encoding)
        throw std::invalid_argument("StreamingDataset: '" + index_path + "': the shards have different columns");
    if (!options_.validate_hash().empty() && !s->raw.hashes.count(options_.validate_hash()))
      throw std::invalid_argument("StreamingDataset: validate_hash '" + options_.validate_hash() + "': shard '" +
                                  s->raw.basename + "' lists no such hash in '" + index_path + "'");
  }
  const auto& columns = shards_[0]->columns;
  if (options_.columns().empty()) {
    for (size_t c = 0; c < columns.size(); ++c)
      if (detail::mds_is_tensor(columns[c].encoding)) batch_columns_.push_back(static_cast<int64_t>(c));
  } else {
    for (const auto& name : options_.columns()) {
      auto it = std::find_if(columns.begin(), columns.end(), [&](const auto& c) { return c.name == name; });
      std::string known;
      for (const auto& c : columns) known += (known.empty() ? "" : ", ") + c.name + " (" + c.encoding + ")";
      if (it == columns.end())
        throw std::invalid_argument("StreamingDataset: columns: no column '" + name + "'; the shards have " + known);
      if (!detail::mds_is_tensor(it->encoding))
        throw std::invalid_argument("StreamingDataset: columns: '" + name + "' is " + it->encoding +
                                    ", which does not become a tensor (read it with sample_strings)");
      batch_columns_.push_back(it - columns.begin());
    }
  }
  if (batch_columns_.empty())
    throw std::invalid_argument("StreamingDataset: '" + index_path + "' has no column that becomes a tensor");
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

StreamingDataset::~StreamingDataset() {
  if (!prefetcher_) return;
  {
    std::lock_guard<std::mutex> lock(prefetcher_->mu);
    prefetcher_->stop = true;
  }
  prefetcher_->wake.notify_all();
  prefetcher_->thread.join();
}

std::string StreamingDataset::lock_path(const std::string& name) const {
  return local_path(".locks/" + name + ".lock");
}

std::string StreamingDataset::local_path(const std::string& basename) const {
  return (fs::path(options_.local()) / options_.split() / basename).string();
}

std::string StreamingDataset::remote_name(const std::string& basename) const {
  std::string path = parse_uri(options_.remote()).path;
  if (!path.empty() && path.back() != '/') path += '/';
  if (!options_.split().empty()) path += options_.split() + "/";
  return path + basename;
}

std::vector<std::pair<std::string, std::string>> StreamingDataset::column_encodings() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& c : shards_[0]->columns) out.emplace_back(c.name, c.encoding);
  return out;
}

namespace {

/// Why `path` does not hold `f` ("" when it does): missing, its size, then its digest when `algo` is set and listed.
std::string damage(const std::string& path, const detail::MdsFile& f, const std::string& algo) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (ec) return "is missing";
  if (static_cast<int64_t>(size) != f.bytes)
    return "has " + std::to_string(size) + " bytes; the index says " + std::to_string(f.bytes);
  if (!algo.empty() && f.hashes.count(algo) && detail::file_digest(path, algo) != f.hashes.at(algo))
    return "fails its " + algo + " check (damaged)";
  return "";
}

}  // namespace

void StreamingDataset::fetch(int64_t shard) const {
  const detail::MdsShard& s = *shards_[static_cast<size_t>(shard)];
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
  const detail::MdsFile& wanted = zipped ? s.zip : s.raw;
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
    detail::zstd_decompress_file(local, raw);
    if (const std::string why = damage(raw, s.raw, algo); !why.empty()) {
      fs::remove(raw, ec);  // made from the compressed file, which stays
      throw std::runtime_error("StreamingDataset: shard '" + raw + "', decompressed from '" + local + "', " + why);
    }
    // Without a remote the compressed file is the only copy: kept, as Streaming keeps it (safe_keep_zip).
    if (!options_.keep_zip() && remote) fs::remove(local, ec);
  }
}

void StreamingDataset::evict_if_needed(int64_t keep, int64_t incoming) const {
  if (options_.cache_limit() <= 0) return;
  // The cache is the node's: what every rank sharing `local` holds counts, the least recently read shards (file
  // times, which readers refresh) go first, and a shard a rank is fetching or opening (its lock held) is skipped.
  detail::FileLock one_eviction_at_a_time(lock_path("cache"));
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
    const detail::MdsShard& s = *shards_[static_cast<size_t>(p.shard)];
    detail::FileLock busy(lock_path(s.raw.basename), /*wait=*/false);
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

void StreamingDataset::touch(int64_t shard) const {
  if (options_.cache_limit() <= 0) return;
  const int64_t now =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count();
  if (touched_ms_[shard] >= 0 && now - touched_ms_[shard] < 100) return;  // a system call per shard per 0.1 s
  touched_ms_[shard] = now;
  std::error_code ec;
  fs::last_write_time(local_path(shards_[shard]->raw.basename), fs::file_time_type::clock::now(), ec);
}

std::shared_ptr<const detail::MappedFile> StreamingDataset::shard_file(int64_t shard) const {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (mapped_[shard]) {
      touch(shard);
      if (prefetcher_) prefetcher_->advance(shard);
      return mapped_[shard];
    }
  }
  std::shared_ptr<const detail::MappedFile> file;
  {
    // Fetched and mapped under the shard's lock, which every rank on the node takes: no rank evicts it or removes
    // its compressed file in between. A mapping outlives the file's removal.
    std::lock_guard<std::mutex> fetching(*shard_locks_[shard]);
    std::optional<detail::FileLock> on_node;
    if (!options_.remote().empty()) on_node.emplace(lock_path(shards_[shard]->raw.basename));
    fetch(shard);
    const std::string path = local_path(shards_[shard]->raw.basename);
    file = std::make_shared<const detail::MappedFile>(path);
    detail::check_mds_header(*file, shards_[shard]->samples, "StreamingDataset: shard '" + path + "'");
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

void StreamingDataset::prefetch(std::vector<int64_t> shards) const {
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
          detail::FileLock on_node(lock_path(shards_[shard]->raw.basename));
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

std::pair<int64_t, int64_t> StreamingDataset::locate(int64_t index) const {
  if (index < 0 || index >= num_samples_)
    throw std::out_of_range("StreamingDataset: sample " + std::to_string(index) + " of " +
                            std::to_string(num_samples_));
  const auto it = std::upper_bound(shard_starts_.begin(), shard_starts_.end(), index) - 1;
  return {it - shard_starts_.begin(), index - *it};
}

Batch StreamingDataset::get_batch(const at::Tensor& indices) const {
  const at::Tensor idx = indices.to(at::kLong).contiguous();
  const int64_t n = idx.numel();
  std::vector<std::vector<at::Tensor>> columns(batch_columns_.size());
  for (int64_t k = 0; k < n; ++k) {
    const auto [shard, local] = locate(idx.data_ptr<int64_t>()[k]);
    const auto file = shard_file(shard);
    const detail::MdsShard& s = *shards_[shard];
    const std::string where = local_path(s.raw.basename);
    const auto values = detail::mds_columns(detail::mds_sample(*file, local, where), s.columns, where);
    for (size_t c = 0; c < batch_columns_.size(); ++c) {
      const auto& col = s.columns[batch_columns_[c]];
      columns[c].push_back(
          detail::mds_decode_tensor(col.encoding, values[batch_columns_[c]], where + " column '" + col.name + "'"));
    }
  }
  std::vector<std::pair<std::string, at::Tensor>> fields;
  for (size_t c = 0; c < batch_columns_.size(); ++c) {
    const std::string& name = shards_[0]->columns[batch_columns_[c]].name;
    for (int64_t k = 1; k < n; ++k)
      if (columns[c][k].sizes() != columns[c][0].sizes()) {
        auto sample = [&](int64_t j) {
          const int64_t id = idx.data_ptr<int64_t>()[j];
          return "sample " + std::to_string(id) + " (shard '" + shards_[locate(id).first]->raw.basename + "') has " +
                 c10::str(columns[c][j].sizes());
        };
        throw std::runtime_error("StreamingDataset: column '" + name + "' has samples of different shapes in one " +
                                 "batch: " + sample(0) + ", " + sample(k));
      }
    fields.emplace_back(name, at::stack(columns[c]));
  }
  return Batch(std::move(fields));
}

std::vector<std::pair<std::string, std::string>> StreamingDataset::sample_strings(int64_t index) const {
  const auto [shard, local] = locate(index);
  const auto file = shard_file(shard);
  const detail::MdsShard& s = *shards_[shard];
  const std::string where = local_path(s.raw.basename);
  const auto values = detail::mds_columns(detail::mds_sample(*file, local, where), s.columns, where);
  std::vector<std::pair<std::string, std::string>> out;
  for (size_t c = 0; c < s.columns.size(); ++c)
    if (!detail::mds_is_tensor(s.columns[c].encoding)) out.emplace_back(s.columns[c].name, std::string(values[c]));
  return out;
}

namespace {

/// Fisher-Yates over [first, last) with mt19937_64 (the standard fixes its output, so the order is the same on every
/// platform).
void shuffle_range(std::vector<int64_t>& v, size_t first, size_t last, std::mt19937_64& rng) {
  for (size_t i = last - first; i > 1; --i) std::swap(v[first + i - 1], v[first + rng() % i]);
}

}  // namespace

std::vector<int64_t> StreamingDataset::global_order(int64_t epoch) const {
  std::vector<int64_t> order;
  order.reserve(static_cast<size_t>(num_samples_));
  if (!options_.shuffle()) {
    for (int64_t i = 0; i < num_samples_; ++i) order.push_back(i);
    return order;
  }
  std::seed_seq seed{static_cast<uint64_t>(options_.shuffle_seed()), static_cast<uint64_t>(epoch)};
  std::mt19937_64 rng(seed);
  std::vector<int64_t> shard_ids(shards_.size());
  for (size_t i = 0; i < shard_ids.size(); ++i) shard_ids[i] = static_cast<int64_t>(i);
  shuffle_range(shard_ids, 0, shard_ids.size(), rng);
  for (int64_t s : shard_ids)
    for (int64_t i = 0; i < shards_[s]->samples; ++i) order.push_back(shard_starts_[s] + i);
  const size_t block = static_cast<size_t>(options_.shuffle_block_size());
  for (size_t b = 0; b < order.size(); b += block) shuffle_range(order, b, std::min(order.size(), b + block), rng);
  return order;
}

at::Tensor StreamingDataset::sample_order(int64_t epoch, int64_t samples_seen, int64_t rank, int64_t world) const {
  if (world < 1 || rank < 0 || rank >= world)
    throw std::invalid_argument("StreamingDataset: rank " + std::to_string(rank) + " of world size " +
                                std::to_string(world));
  const std::vector<int64_t> order = global_order(epoch);
  std::vector<int64_t> mine;
  std::vector<int64_t> first_use;
  std::vector<bool> seen(shards_.size(), false);
  // Every rank gets as many samples as the others, as MosaicML Streaming pads its partitions: the rest of the global
  // order is read round-robin, and where it does not divide by the world size the last round wraps around to the
  // order's first samples (seen twice in that epoch). Unequal counts would leave a rank alone in a collective.
  const int64_t seen_before = std::min(std::max<int64_t>(0, samples_seen), num_samples_);
  const int64_t per_rank = (num_samples_ - seen_before + world - 1) / world;
  for (int64_t k = 0; k < per_rank; ++k) {
    const int64_t id = order[static_cast<size_t>((seen_before + rank + k * world) % num_samples_)];
    mine.push_back(id);
    const int64_t shard = locate(id).first;
    if (!seen[shard]) {
      seen[shard] = true;
      first_use.push_back(shard);
    }
  }
  prefetch(std::move(first_use));
  at::Tensor t = at::empty({static_cast<int64_t>(mine.size())}, at::kLong);
  std::copy(mine.begin(), mine.end(), t.data_ptr<int64_t>());
  return t;
}

std::shared_ptr<DatasetLoader> make_streaming_loader(std::shared_ptr<const StreamingDataset> dataset,
                                                     DatasetLoaderOptions options, int64_t rank, int64_t world_size) {
  if (!dataset) throw std::invalid_argument("make_streaming_loader: dataset must be set");
  if (rank < 0) rank = dist::get_global_rank();
  if (world_size < 0) world_size = dist::get_world_size();
  const StreamingDataset* ds = dataset.get();
  options.num_replicas(world_size).rank(rank).sample_order([ds, rank, world_size](int64_t epoch, int64_t seen) {
    return ds->sample_order(epoch, seen, rank, world_size);
  });
  return std::make_shared<DatasetLoader>(std::move(dataset), std::move(options));
}

}  // namespace composer
