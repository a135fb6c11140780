// write_mds: a Dataset written in MosaicML Streaming's MDS format (index.json and shards), which
// streaming.StreamingDataset and our StreamingDataset read back (`composer-cpp convert`).
#pragma once

#include "composer/data/dataset.h"

#include <torch/arg.h>

#include <cstdint>
#include <string>
#include <vector>

namespace composer {

struct MdsWriterOptions {
  /// "" (none), "zstd" or "zstd:<level>".
  TORCH_ARG(std::string, compression);
  /// Bytes of samples per shard before a new one starts (Streaming's size_limit, default 64 MiB).
  TORCH_ARG(int64_t, size_limit) = int64_t{1} << 26;
  /// Digests recorded for every shard file (sha1, sha256, md5, ...).
  TORCH_ARG(std::vector<std::string>, hashes) = std::vector<std::string>{"sha1"};

 public:
  /// The keys a config sets (repr, hyperparameter logging, read_options).
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("compression", self.compression_, "none, zstd or zstd:<level>");
    visit("size_limit", self.size_limit_, "bytes of samples per shard");
    visit("hashes", self.hashes_, "digests recorded for every shard file");
  }
};

/// Writes every sample of `dataset` to the folder `out` (created; it must not hold an index.json yet), one column per
/// batch field: uint8 [C, H, W] images with C = 1, 3 or 4 as 'pil' (modes L, RGB, RGBA), other tensors of one
/// shape as 'ndarray:<dtype>:<shape>', one-value fields as 'int' (integers) or 'float32'/'float64'. Files are
/// written crash-safely, the index last. Returns the number of shards; throws std::invalid_argument naming the field
/// for a tensor it cannot encode.
int64_t write_mds(const Dataset& dataset, const std::string& out, const MdsWriterOptions& options = MdsWriterOptions());

}  // namespace composer
