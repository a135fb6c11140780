// DataSpec: Composer's DataSpec for a loader whose batches need their own rules. It wraps any DataLoader and
// answers the DataLoader's hooks (transforms, split_batch, samples and tokens per batch) with the functions given,
// the defaults where one is not given; everything else goes to the wrapped loader.
//
//   auto spec = std::make_shared<DataSpec>(loader, DataSpecOptions().split_batch(split_sequences));
//   TrainerOptions(model).train_dataloader(spec)...
#pragma once

#include "composer/data/data_loader.h"

#include <torch/arg.h>

#include <functional>
#include <memory>

namespace composer {

struct DataSpecOptions {
  using Transform = std::function<Batch(Batch)>;
  using Split = std::function<std::vector<Batch>(const Batch&, double)>;
  using CountSamples = std::function<double(const Batch&)>;
  using CountTokens = std::function<int64_t(const Batch&, TokenType)>;

  /// Composer's batch_transforms: runs on each batch before it moves to the device.
  TORCH_ARG(Transform, batch_transforms);
  /// Composer's microbatch_transforms: runs on each microbatch after the move.
  TORCH_ARG(Transform, microbatch_transforms);
  /// Composer's split_batch: the microbatches for a size in samples (a fraction splits samples).
  TORCH_ARG(Split, split_batch);
  /// Composer's get_num_samples_in_batch.
  TORCH_ARG(CountSamples, get_num_samples_in_batch);
  /// Composer's get_num_tokens_in_batch (a dict of 'total' and 'loss_generating' becomes the TokenType argument).
  TORCH_ARG(CountTokens, get_num_tokens_in_batch);
};

class DataSpec : public DataLoader {
 public:
  /// Requires a loader (std::invalid_argument otherwise).
  DataSpec(std::shared_ptr<DataLoader> loader, DataSpecOptions options = {});

  const std::shared_ptr<DataLoader>& dataloader() const { return loader_; }

  std::optional<int64_t> length() const override { return loader_->length(); }
  int64_t batch_size() const override { return loader_->batch_size(); }
  void set_epoch(int64_t epoch) override { loader_->set_epoch(epoch); }
  void reset() override { loader_->reset(); }
  std::optional<Batch> next() override { return loader_->next(); }
  void skip(int64_t n) override { loader_->skip(n); }
  void resume(int64_t batch_in_epoch, int64_t sample_in_epoch) override {
    loader_->resume(batch_in_epoch, sample_in_epoch);
  }
  bool is_distributed() const override { return loader_->is_distributed(); }

  Batch transform_batch(Batch batch) const override;
  Batch transform_microbatch(Batch batch) const override;
  std::vector<Batch> split_batch(const Batch& batch, double microbatch_size) const override;
  double num_samples_in_batch(const Batch& batch) const override;
  int64_t num_tokens_in_batch(const Batch& batch, TokenType type) const override;

 private:
  std::shared_ptr<DataLoader> loader_;
  DataSpecOptions options_;
};

}  // namespace composer
