// The layer tensor parallelism puts in place of a split composer::nn::Linear, and the collectives around it and the
// vocabulary's layers (Megatron's f and g): a column-parallel layer's input passes unchanged in the forward and
// has its gradient all-reduced over the group in the backward; a row-parallel layer's partial output is all-reduced
// in the forward and its gradient passes unchanged in the backward; a gathered output is each rank's slice of the
// last dimension put together, its gradient cut back to the slice.
#pragma once

#include "composer/dist/dist.h"
#include "composer/nn/layer.h"
#include "composer/nn/layers.h"
#include "composer/nn/tensor_parallel_plan.h"

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace composer::dist::detail {

/// The group's number in the registry the autograd functions read (an autograd context keeps IValues only).
int64_t register_group(const Group& group);
/// The group registered as `id`.
Group group_at(int64_t id);
/// x summed over group `id` (a copy), after automatic microbatching's agreement check.
at::Tensor summed_over(const at::Tensor& x, int64_t id);
/// The ranks' x put together along `dim`, in rank order (no autograd), after the agreement check.
at::Tensor gathered_along(const at::Tensor& x, int64_t dim, int64_t id);
/// Megatron's f: x unchanged; in the backward its gradient summed over group `id`.
at::Tensor copy_to_group(const at::Tensor& x, int64_t id);
/// Megatron's g: x summed over group `id`; its gradient unchanged.
at::Tensor reduce_from_group(const at::Tensor& x, int64_t id);
/// The ranks' x put together along the last dimension, in rank order; the backward keeps this rank's slice.
at::Tensor gather_from_group(const at::Tensor& x, int64_t id);

class ParallelLinear final : public nn::Layer {
 public:
  /// Takes over `inner`'s parameters (already narrowed to this rank's slice), under their names. With
  /// `sequence_parallel` a column-parallel layer takes its input as the norm before it gathered it, a row-parallel one
  /// reduce-scatters its output over the sequence (sequence_parallel.h).
  ParallelLinear(const nn::Linear& inner, nn::ParallelStyle style, const Group& group, bool sequence_parallel);
  /// While the weights are whole (Strategy::gather_full_weights, for an export), the unsplit layer's forward, with no
  /// collective: one rank may run it alone (a TorchScript trace).
  at::Tensor forward(const at::Tensor& x) override;
  nn::ParallelStyle style() const { return style_; }

 private:
  nn::ParallelStyle style_;
  bool sequence_parallel_;
  int64_t group_;
  at::Tensor weight_, bias_;
  int64_t local_features_;  // the split dimension's size on this rank
};

}  // namespace composer::dist::detail
