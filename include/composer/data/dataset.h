// Dataset: random access to samples, collated into batches.
#pragma once

#include "composer/data/batch.h"

#include <ATen/core/Tensor.h>

namespace composer {

/// Contract: get_batch() is thread-safe (loader workers call it concurrently) and returns the samples at
/// `indices` (int64, 1-D) collated along dim 0, in that order.
class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  virtual Batch get_batch(const at::Tensor& indices) const = 0;
};

/// Tensors held in memory; every field of `data` has the samples along dim 0.
class TensorDataset : public Dataset {
 public:
  explicit TensorDataset(Batch data);
  int64_t size() const override { return size_; }
  Batch get_batch(const at::Tensor& indices) const override;
  const Batch& data() const { return data_; }
  /// The first `n` samples (a view).
  TensorDataset head(int64_t n) const;

 private:
  Batch data_;
  int64_t size_;
};

}  // namespace composer
