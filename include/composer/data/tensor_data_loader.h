// TensorDataLoader: batches over tensors held in memory, with a seeded shuffle and a distributed mode.
#pragma once

#include "composer/data/batching_fields.h"
#include "composer/data/data_loader.h"

#include <torch/arg.h>

namespace composer {

struct TensorDataLoaderOptions {
  explicit TensorDataLoaderOptions(int64_t batch_size) : batch_size_(batch_size) {}
  /// Samples per batch (> 0).
  TORCH_ARG(int64_t, batch_size);
  /// Shuffle each epoch with a permutation seeded by seed + epoch.
  TORCH_ARG(bool, shuffle) = false;
  /// Base seed of the shuffle.
  TORCH_ARG(uint64_t, seed) = 0;
  /// Drop the last incomplete batch.
  TORCH_ARG(bool, drop_last) = false;
  /// Number of ranks sharing the data (DistributedSampler num_replicas); 1 = not distributed.
  TORCH_ARG(int64_t, num_replicas) = 1;
  /// This process's shard, in [0, num_replicas).
  TORCH_ARG(int64_t, rank) = 0;
  /// Throws std::invalid_argument naming the bad field.

 public:
  void validate() const;

 public:
  /// The keys a config sets (repr, hyperparameter logging, read_options).
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit_batching_fields(self, visit);
  }
};

/// Iterates a Batch holding the whole data set (every field shares dim 0). With num_replicas > 1 it behaves like
/// torch's DistributedSampler: indices padded by wrapping to a multiple of num_replicas, then rank::num_replicas.
class TensorDataLoader : public DataLoader {
 public:
  TensorDataLoader(Batch data, TensorDataLoaderOptions options);

  std::optional<int64_t> length() const override;
  int64_t batch_size() const override { return options_.batch_size(); }
  void set_epoch(int64_t epoch) override { epoch_ = epoch; }
  void reset() override;
  std::optional<Batch> next() override;
  void skip(int64_t n) override;
  bool is_distributed() const override { return options_.num_replicas() > 1; }

  /// Samples this rank sees per pass.
  int64_t num_samples() const;
  const Batch& data() const { return data_; }

 private:
  Batch data_;
  TensorDataLoaderOptions options_;
  int64_t epoch_ = 0;
  at::Tensor indices_;  // this rank's sample order for the current pass
  int64_t cursor_ = 0;  // next position in indices_
};

}  // namespace composer
