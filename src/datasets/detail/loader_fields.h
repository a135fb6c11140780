// The loader keys every data set takes, and the checks the data set builders share (private to src/datasets).
#pragma once

#include "composer/core/fields.h"
#include "composer/data/dataset_loader.h"
#include "composer/datasets/registry.h"

#include <optional>
#include <string>

namespace composer::datasets::detail {

struct LoaderFields {
  int64_t batch_size = 64;
  std::optional<bool> shuffle;   // unset: the training data only
  std::optional<uint64_t> seed;  // unset: the run's seed
  bool drop_last = false;
  int64_t num_workers = 0;  // as torch's DataLoader: see DatasetLoaderOptions::num_workers

  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("batch_size", self.batch_size, "samples per batch (per rank)");
    visit("shuffle", self.shuffle, "reshuffle every epoch; unset: the training data only");
    visit("seed", self.seed, "shuffling seed; unset: the run's seed");
    visit("drop_last", self.drop_last, "drop the last incomplete batch");
    visit("num_workers", self.num_workers, "background threads that prepare batches; 0: none (the training thread)");
  }
};

/// The split to read: `split` if given ('train' or 'test'), else the request's.
std::string split_of(Hparams& h, const std::optional<std::string>& split, const DataRequest& request);

/// Requires value > 0 (or >= 0 when allow_zero); the error names the key.
int64_t positive(Hparams& h, const std::string& key, int64_t value, bool allow_zero = false);

/// The loader options of `fields` for `request` (ranks, shuffling and seed as DataRequest describes).
DatasetLoaderOptions loader_options(Hparams& h, const LoaderFields& fields, const DataRequest& request);

}  // namespace composer::datasets::detail
