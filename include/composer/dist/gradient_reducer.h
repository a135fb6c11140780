// GradientReducer: data-parallel gradient averaging with bucketed, overlapped all-reduce (written here because
// LibTorch's C++ DDP reducer is internal and changes between versions).
#pragma once

#include "composer/dist/dist.h"

#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>

namespace composer::dist {

/// Contract: construct once over the trainable parameters (same order on every rank). Before the backward pass
/// whose gradients should be synchronised call prepare(true) (prepare(false), or nothing, for microbatches that only
/// accumulate). Each parameter's hook copies its accumulated gradient into a flat bucket (the first up to 1 MB, the
/// rest up to `bucket_bytes`);
/// a full bucket's all-reduce starts at once, overlapping the rest of the backward pass. finalize() after backward
/// starts any incomplete buckets (unused parameters count as zero), waits, and writes the averages into .grad.
class GradientReducer {
 public:
  explicit GradientReducer(std::vector<at::Tensor> params, int64_t bucket_bytes = 25 * 1024 * 1024);
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  void prepare(bool sync);
  void finalize();
  /// Number of buckets (parameters are grouped in reverse order, close to the order backward produces them).
  size_t num_buckets() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

/// Copies rank 0's parameters and buffers to every rank (DDP's start-up broadcast).
void broadcast_module(const std::vector<at::Tensor>& tensors, int64_t src = 0);

}  // namespace composer::dist
