// The layer tensor parallelism puts in place of a split composer::nn::Linear, and the collectives around it (Megatron's
// f and g): a column-parallel layer's input passes unchanged in the forward and has its gradient all-reduced over the
// group in the backward; a row-parallel layer's partial output is all-reduced in the forward and its gradient passes
// unchanged in the backward.
#pragma once

#include "composer/dist/dist.h"
#include "composer/nn/layer.h"
#include "composer/nn/layers.h"
#include "composer/nn/tensor_parallel_plan.h"

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace composer::dist::detail {

class ParallelLinear final : public nn::Layer {
 public:
  /// Takes over `inner`'s parameters (already narrowed to this rank's slice), under their names.
  ParallelLinear(const nn::Linear& inner, nn::ParallelStyle style, const Group& group);
  at::Tensor forward(const at::Tensor& x) override;
  nn::ParallelStyle style() const { return style_; }

 private:
  nn::ParallelStyle style_;
  int64_t group_;  // the group's place in the registry the autograd functions read
  at::Tensor weight_, bias_;
};

}  // namespace composer::dist::detail
