#include "composer/data/streaming_dataset.h"

#include "composer/dist/env.h"
#include "composer/storage/object_store.h"
#include "data/detail/mds.h"
#include "data/detail/shard_cache.h"

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

// The shards index.json lists, which must agree on their columns (and list the hash validate_hash names).
std::vector<std::shared_ptr<detail::MdsShard>> read_index(const std::string& path, const std::string& remote,
                                                          const std::string& validate_hash) {
  std::ifstream in(path);
  if (!in)
    throw std::invalid_argument("StreamingDataset: no index at '" + path + "'" +
                                (remote.empty() ? " (and no remote to download it from)" : ""));
  nlohmann::json index;
  try {
    in >> index;
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument("StreamingDataset: '" + path + "' is not JSON: " + e.what());
  }
  std::vector<std::shared_ptr<detail::MdsShard>> shards;
  for (auto& shard : detail::parse_mds_index(index, path))
    shards.push_back(std::make_shared<detail::MdsShard>(std::move(shard)));
  if (shards.empty()) throw std::invalid_argument("StreamingDataset: '" + path + "' lists no shards");
  for (const auto& s : shards) {
    bool same = s->columns.size() == shards[0]->columns.size();
    for (size_t c = 0; same && c < s->columns.size(); ++c)
      same =
          s->columns[c].name == shards[0]->columns[c].name && s->columns[c].encoding == shards[0]->columns[c].encoding;
    if (!same) throw std::invalid_argument("StreamingDataset: '" + path + "': the shards have different columns");
    if (!validate_hash.empty() && !s->raw.hashes.count(validate_hash))
      throw std::invalid_argument("StreamingDataset: validate_hash '" + validate_hash + "': shard '" + s->raw.basename +
                                  "' lists no such hash in '" + path + "'");
  }
  return shards;
}

// The columns a batch holds: `wanted` (each must become a tensor), or every column that becomes one.
std::vector<int64_t> batch_columns(const std::vector<detail::MdsColumn>& columns,
                                   const std::vector<std::string>& wanted, const std::string& path) {
  std::vector<int64_t> out;
  if (wanted.empty()) {
    for (size_t c = 0; c < columns.size(); ++c)
      if (detail::mds_is_tensor(columns[c].encoding)) out.push_back(static_cast<int64_t>(c));
  }
  for (const auto& name : wanted) {
    auto it = std::find_if(columns.begin(), columns.end(), [&](const auto& c) { return c.name == name; });
    std::string known;
    for (const auto& c : columns) known += (known.empty() ? "" : ", ") + c.name + " (" + c.encoding + ")";
    if (it == columns.end())
      throw std::invalid_argument("StreamingDataset: columns: no column '" + name + "'; the shards have " + known);
    if (!detail::mds_is_tensor(it->encoding))
      throw std::invalid_argument("StreamingDataset: columns: '" + name + "' is " + it->encoding +
                                  ", which does not become a tensor (read it with sample_strings)");
    out.push_back(it - columns.begin());
  }
  if (out.empty()) throw std::invalid_argument("StreamingDataset: '" + path + "' has no column that becomes a tensor");
  return out;
}

}  // namespace

StreamingDataset::StreamingDataset(StreamingDatasetOptions options) : options_(std::move(options)) {
  options_.validate();
  cache_ = std::make_unique<detail::ShardCache>(options_);
  const std::string index_path = cache_->index();
  shards_ = read_index(index_path, options_.remote(), options_.validate_hash());
  for (const auto& s : shards_) {
    shard_starts_.push_back(num_samples_);
    num_samples_ += s->samples;
  }
  batch_columns_ = batch_columns(shards_[0]->columns, options_.columns(), index_path);
  cache_->attach(shards_);
}

StreamingDataset::~StreamingDataset() = default;

std::vector<std::pair<std::string, std::string>> StreamingDataset::column_encodings() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& c : shards_[0]->columns) out.emplace_back(c.name, c.encoding);
  return out;
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
    const auto file = cache_->file(shard);
    const detail::MdsShard& s = *shards_[shard];
    const std::string where = cache_->local_path(s.raw.basename);
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
  const auto file = cache_->file(shard);
  const detail::MdsShard& s = *shards_[shard];
  const std::string where = cache_->local_path(s.raw.basename);
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
  cache_->prefetch(std::move(first_use));
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
