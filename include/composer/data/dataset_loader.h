// DatasetLoader: batches from a Dataset, made by worker threads ahead of use, in a deterministic order.
#pragma once

#include "composer/data/batching_fields.h"
#include "composer/data/data_loader.h"
#include "composer/data/dataset.h"
#include "composer/data/sampler.h"

#include <ATen/core/Generator.h>

#include <functional>
#include <memory>

namespace composer {

/// A batch transform run in a worker (normalize, crop, flip, ...). `gen` is seeded from (seed, epoch, batch index),
/// so results do not depend on thread scheduling.
using BatchTransform = std::function<Batch(Batch batch, at::Generator& gen)>;
/// This rank's sample indices for `epoch`, leaving out what the first `samples_seen` samples of the epoch's global
/// order went to (all ranks together). Replaces the DistributedSampler order (StreamingDataset::sample_order).
using SampleOrder = std::function<at::Tensor(int64_t epoch, int64_t samples_seen)>;

struct DatasetLoaderOptions {
  explicit DatasetLoaderOptions(int64_t batch_size) : batch_size_(batch_size) {}
  TORCH_ARG(int64_t, batch_size);
  TORCH_ARG(bool, shuffle) = true;
  TORCH_ARG(uint64_t, seed) = 0;
  /// Drop the last incomplete batch.
  TORCH_ARG(bool, drop_last) = false;
  /// Worker threads; 0 (the default, as torch's DataLoader) makes batches on the calling thread. On a CPU run whose
  /// intra-op threads use every core, workers take time from the model's kernels (10 % of a CNN's training on 2
  /// cores, bench/results/time_to_accuracy.md); give 2 or more where cores are spare (a GPU host).
  TORCH_ARG(int64_t, num_workers) = 0;
  /// Batches made ahead, per worker.
  TORCH_ARG(int64_t, prefetch_factor) = 2;
  /// Distributed mode: ranks sharing the data and this rank (each reads a disjoint shard).
  TORCH_ARG(int64_t, num_replicas) = 1;
  TORCH_ARG(int64_t, rank) = 0;
  TORCH_ARG(BatchTransform, transform);
  /// Pin batches in page-locked memory (CUDA builds) for asynchronous host-to-device copies.
  TORCH_ARG(bool, pin_memory) = false;
  /// When set, the order of every epoch (shuffle, seed, num_replicas and rank are then the order's business).
  TORCH_ARG(SampleOrder, sample_order);

 public:
  void validate() const;

 public:
  /// The keys a config sets; transform and sample_order are functions, set in code.
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit_batching_fields(self, visit);
    visit("num_workers", self.num_workers_, "background threads preparing batches; 0: none (the calling thread)");
    visit("prefetch_factor", self.prefetch_factor_, "batches each worker prepares ahead");
    visit("pin_memory", self.pin_memory_, "page-locked batches for faster host-to-device copies");
  }
};

/// Contract: set_epoch(e); reset(); then next() yields the batches of epoch e in order; skip(n) right after
/// reset() resumes mid-epoch at batch n without making the skipped batches.
class DatasetLoader : public DataLoader {
 public:
  DatasetLoader(std::shared_ptr<const Dataset> dataset, DatasetLoaderOptions options);
  ~DatasetLoader() override;
  DatasetLoader(const DatasetLoader&) = delete;
  DatasetLoader& operator=(const DatasetLoader&) = delete;

  std::optional<int64_t> length() const override;
  int64_t batch_size() const override { return options_.batch_size(); }
  void set_epoch(int64_t epoch) override;
  void reset() override;
  std::optional<Batch> next() override;
  void skip(int64_t n) override;
  /// With a sample_order: continues after sample_in_epoch samples of the global order; else skip(batch_in_epoch).
  void resume(int64_t batch_in_epoch, int64_t sample_in_epoch) override;
  bool is_distributed() const override { return options_.num_replicas() > 1; }

  /// Position in the current pass: (epoch, batches consumed).
  std::pair<int64_t, int64_t> position() const;
  const Dataset& dataset() const { return *dataset_; }
  /// Runs `transform` before the configured transform (algorithms add theirs at FIT_START). Stops prefetching
  /// workers; the next reset() starts them with the new pipeline.
  void prepend_transform(BatchTransform transform);

 private:
  struct Pipeline;
  Batch make_batch(int64_t index) const;
  void stop_workers();

  std::shared_ptr<const Dataset> dataset_;
  DatasetLoaderOptions options_;
  int64_t epoch_ = 0;
  at::Tensor order_;  // this rank's indices for the epoch
  int64_t num_batches_ = 0;
  int64_t full_batches_ = 0;  // batches of a whole epoch (length())
  int64_t cursor_ = 0;        // next batch to hand out
  std::unique_ptr<Pipeline> pipeline_;
};

}  // namespace composer
