// StreamingDataset: samples in MosaicML Streaming's MDS format (index.json and shard files), read from a local
// folder or streamed from an object store into a local cache, in an order that is a function of (seed, epoch)
// partitioned over ranks, resumable mid-epoch on a different number of ranks.
#pragma once

#include "composer/data/dataset.h"
#include "composer/data/dataset_loader.h"

#include <torch/arg.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace composer {

namespace detail {
struct MdsShard;
class ShardCache;
}  // namespace detail

struct StreamingDatasetOptions {
  /// Where the shards are: an object-store URI ("s3://bucket/mds/train", "https://...", "file:///...") or "" when
  /// `local` already holds them.
  TORCH_ARG(std::string, remote);
  /// The local cache folder (index.json and shards). Required.
  TORCH_ARG(std::string, local);
  /// A subfolder of remote and local, if the data set has splits ("train", "val").
  TORCH_ARG(std::string, split);
  /// Shuffle the order every epoch (Streaming's shuffle).
  TORCH_ARG(bool, shuffle) = false;
  /// The shuffle's seed (Streaming's default).
  TORCH_ARG(int64_t, shuffle_seed) = 9176;
  /// Samples shuffled together: shards are shuffled, then blocks of this many consecutive samples of the shard
  /// order (Streaming's py1b idea); larger mixes more and reads more shards at once.
  TORCH_ARG(int64_t, shuffle_block_size) = 262144;
  /// The column names that form the batch, in order; empty: every column that becomes a tensor, in index order.
  TORCH_ARG(std::vector<std::string>, columns);
  /// A hash algorithm that every shard's index entry lists and whose digest is checked when the shard arrives
  /// ("sha1", "sha256", "md5", ...; Streaming's validate_hash); empty: none.
  TORCH_ARG(std::string, validate_hash);
  /// Keep the compressed shard files in the cache after decompressing them (always kept without a remote: `local`
  /// is then the only copy).
  TORCH_ARG(bool, keep_zip) = false;
  /// Bytes of shards the cache may hold, counting every rank that shares `local`: the least recently opened shards
  /// are deleted beyond it. 0: no limit. Needs a remote (without one, `local` is the data and nothing is deleted).
  TORCH_ARG(int64_t, cache_limit) = 0;
  /// Shards downloaded ahead of use by a background thread (in this rank's order of first use).
  TORCH_ARG(int64_t, predownload) = 8;
  /// Attempts per shard download.
  TORCH_ARG(int64_t, download_retry) = 2;

 public:
  void validate() const;
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("remote", self.remote_, "object-store URI of the shards; empty: local already has them");
    visit("local", self.local_, "local cache folder (required)");
    visit("split", self.split_, "subfolder of remote and local");
    visit("shuffle", self.shuffle_, "shuffle every epoch");
    visit("shuffle_seed", self.shuffle_seed_, "seed of the shuffle");
    visit("shuffle_block_size", self.shuffle_block_size_, "samples shuffled together");
    visit("columns", self.columns_, "columns that form the batch; empty: every tensor column");
    visit("validate_hash", self.validate_hash_, "hash to check on each shard (sha1, sha256, md5, ...)");
    visit("keep_zip", self.keep_zip_, "keep compressed shards after decompressing");
    visit("cache_limit", self.cache_limit_, "bytes of shards the cache may hold; 0: no limit");
    visit("predownload", self.predownload_, "shards downloaded ahead of use");
    visit("download_retry", self.download_retry_, "attempts per shard download");
  }
};

/// Column encodings that become tensors: int, uint8..uint64, int8..int64, float16/32/64, str_int, str_float
/// (scalars), ndarray[:dtype[:shape]] (the array), pil, jpeg and png (uint8 [C, H, W]), jpeg_array and
/// list[pil|jpeg|png] (uint8 [K, C, H, W]). str, bytes, json and str_decimal columns are read (sample_strings) but
/// not batched; pkl is refused, as Streaming refuses it by default. Compression: none or zstd. Thread-safe: loader
/// workers read concurrently, and the ranks of a node may share one cache folder (file locks order them).
class StreamingDataset : public Dataset {
 public:
  /// Reads index.json (downloading it first when remote is set). Throws std::invalid_argument naming the folder or
  /// URI for a missing or malformed index, an unknown encoding, compression or hash.
  explicit StreamingDataset(StreamingDatasetOptions options);
  ~StreamingDataset() override;
  int64_t size() const override { return num_samples_; }
  /// Rows of the chosen columns; scalar columns become [n] tensors, arrays and images [n, ...] (equal shapes).
  Batch get_batch(const at::Tensor& indices) const override;
  /// The text columns of one sample (str, json, str_decimal as text; bytes as raw bytes), by column name.
  std::vector<std::pair<std::string, std::string>> sample_strings(int64_t index) const;
  /// Column names and encodings, in index order.
  std::vector<std::pair<std::string, std::string>> column_encodings() const;
  int64_t num_shards() const { return static_cast<int64_t>(shards_.size()); }

  /// The global order of `epoch` (every sample once): shards shuffled, then blocks of shuffle_block_size samples,
  /// from a generator seeded by (shuffle_seed, epoch); the identity without shuffle.
  std::vector<int64_t> global_order(int64_t epoch) const;
  /// Rank `rank` of `world`: the global order's positions samples_seen + rank, + world, ..., ceil((num_samples -
  /// samples_seen) / world) of them on every rank, so all ranks get the same count (MosaicML Streaming's padding):
  /// positions past the end wrap around to the order's first samples, which that epoch then sees twice. Starts
  /// downloading this rank's shards ahead of use.
  at::Tensor sample_order(int64_t epoch, int64_t samples_seen, int64_t rank, int64_t world) const;
  const StreamingDatasetOptions& options() const { return options_; }

 private:
  std::pair<int64_t, int64_t> locate(int64_t index) const;

  StreamingDatasetOptions options_;
  std::vector<std::shared_ptr<detail::MdsShard>> shards_;
  std::vector<int64_t> shard_starts_;  // first global index of each shard
  int64_t num_samples_ = 0;
  std::vector<int64_t> batch_columns_;
  std::unique_ptr<detail::ShardCache> cache_;  // the shards' local copies (data/detail/shard_cache.h)
};

/// A DatasetLoader over a StreamingDataset in its own order for this rank (dist's rank and world size unless
/// given), with `batch_size` samples per batch. Workers, transforms and mid-epoch resume work as for any
/// DatasetLoader; resume continues from the global sample count, so the world size may change.
std::shared_ptr<DatasetLoader> make_streaming_loader(std::shared_ptr<const StreamingDataset> dataset,
                                                     DatasetLoaderOptions options, int64_t rank = -1,
                                                     int64_t world_size = -1);

}  // namespace composer
