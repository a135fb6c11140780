// DataLoader: what the Trainer iterates. Implementations: TensorDataLoader (in-memory), and the threaded
// Dataset loader of the data component.
#pragma once

#include "composer/data/batch.h"

#include <optional>

namespace composer {

/// One pass over the data per epoch. Contract: set_epoch(e) then reset() start the pass of epoch e; next()
/// returns batches until it returns nullopt. The same epoch number gives the same batches in the same order.
class DataLoader {
 public:
  virtual ~DataLoader() = default;
  /// Batches in one pass, or nullopt for an unsized loader.
  virtual std::optional<int64_t> length() const = 0;
  /// Samples per batch (the last batch may be smaller unless drop_last).
  virtual int64_t batch_size() const = 0;
  /// Selects the shuffle order of the coming pass (DistributedSampler.set_epoch).
  virtual void set_epoch(int64_t epoch) = 0;
  /// Starts a new pass.
  virtual void reset() = 0;
  /// The next batch of the pass; nullopt when exhausted.
  virtual std::optional<Batch> next() = 0;
  /// Skips `n` batches of the current pass (mid-epoch resume). The default consumes them with next().
  virtual void skip(int64_t n) {
    for (int64_t i = 0; i < n && next(); ++i) {
    }
  }
  /// Resumes the current pass mid-epoch, right after reset(): `batch_in_epoch` batches of this rank and
  /// `sample_in_epoch` samples of all ranks together were consumed before. The default skips the batches; a loader
  /// whose order is global (StreamingDataset) continues from the sample count, so a run saved on N ranks can resume
  /// on M.
  virtual void resume(int64_t batch_in_epoch, int64_t sample_in_epoch) {
    (void)sample_in_epoch;
    skip(batch_in_epoch);
  }
  /// True when each rank reads a disjoint shard (required when the world size is above 1).
  virtual bool is_distributed() const { return false; }
};

}  // namespace composer
