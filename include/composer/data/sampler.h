// DistributedSampler: the sample order of one epoch on one rank (torch.utils.data.DistributedSampler's rules).
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/arg.h>

namespace composer {

struct SamplerOptions {
  /// Shuffle with a permutation seeded by seed + epoch.
  TORCH_ARG(bool, shuffle) = true;
  TORCH_ARG(uint64_t, seed) = 0;
  /// Ranks sharing the data, and this rank.
  TORCH_ARG(int64_t, num_replicas) = 1;
  TORCH_ARG(int64_t, rank) = 0;
  /// Drop the tail so every rank gets the same count, instead of padding by wrapping around.
  TORCH_ARG(bool, drop_last) = false;

 public:
  void validate() const;

 public:
  /// The keys a config sets (repr, hyperparameter logging, read_options).
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("shuffle", self.shuffle_, "shuffle with a permutation seeded by seed + epoch");
    visit("seed", self.seed_, "the shuffling seed");
    visit("num_replicas", self.num_replicas_, "ranks sharing the data");
    visit("rank", self.rank_, "this rank");
    visit("drop_last", self.drop_last_, "drop the tail so every rank gets the same count");
  }
};

/// Indices (int64) this rank reads in `epoch`, for a data set of `dataset_size` samples. Disjoint across ranks;
/// the same (options, epoch) always gives the same order.
at::Tensor sample_indices(int64_t dataset_size, int64_t epoch, const SamplerOptions& options);

}  // namespace composer
