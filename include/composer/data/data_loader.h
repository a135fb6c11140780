// DataLoader: what the Trainer iterates. Implementations: TensorDataLoader (in-memory), and the threaded
// Dataset loader of the data component.
#pragma once

#include "composer/data/batch.h"

#include <optional>
#include <vector>

namespace composer {

/// Which tokens Composer's get_num_tokens_in_batch counts: all of them, or those that produce a loss.
enum class TokenType { kTotal, kLossGenerating };

/// Composer's default_split_batch: consecutive pieces of `microbatch_size` samples (views). A size that is not a
/// whole number is refused, as Composer refuses a float: splitting a sample needs a loader's own split_batch.
std::vector<Batch> default_split_batch(const Batch& batch, double microbatch_size);
/// The default token count: numel of "input_ids" (kTotal); for kLossGenerating the integer "labels" that are not
/// the ignore index -100 (llm-foundry's count), else every input token.
int64_t default_num_tokens_in_batch(const Batch& batch, TokenType type);

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

  // Composer's DataSpec hooks: a loader whose batches need their own rules overrides these (or wraps itself in a
  // DataSpec, data/data_spec.h). The Trainer asks them of the loader it is reading.

  /// Changes a batch before it moves to the device (Composer's batch_transforms). Default: unchanged.
  virtual Batch transform_batch(Batch batch) const { return batch; }
  /// Changes a microbatch after the move, before its forward (Composer's microbatch_transforms). Default: unchanged.
  virtual Batch transform_microbatch(Batch batch) const { return batch; }
  /// The microbatches of `batch` for a device_train_microbatch_size (or device_eval_microbatch_size) of
  /// `microbatch_size` samples; a fraction (0.5) only where the loader can split a sample (Composer's split_batch).
  virtual std::vector<Batch> split_batch(const Batch& batch, double microbatch_size) const {
    return default_split_batch(batch, microbatch_size);
  }
  /// Samples in a batch or microbatch, which weighs microbatches and counts time (Composer's
  /// get_num_samples_in_batch; may be a fraction for a split sample). Default: the common dim-0 size.
  virtual double num_samples_in_batch(const Batch& batch) const { return static_cast<double>(batch.num_samples()); }
  /// Tokens in a batch (Composer's get_num_tokens_in_batch): kTotal counts time, kLossGenerating weighs
  /// microbatches under accumulate_train_batch_on_tokens.
  virtual int64_t num_tokens_in_batch(const Batch& batch, TokenType type = TokenType::kTotal) const {
    return default_num_tokens_in_batch(batch, type);
  }
};

}  // namespace composer
