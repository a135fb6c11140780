// LowPrecisionGroupNorm: GroupNorms that run in the autocast dtype instead of float32 (Composer's
// LowPrecisionGroupNorm and LPGroupNorm).
#pragma once

#include "composer/algorithms/low_precision_norm.h"
#include "composer/algorithms/module_surgery.h"
#include "composer/core/precision.h"
#include "composer/nn/layers.h"

#include <vector>

namespace composer {
namespace nn {

/// A GroupNorm that, under autocast, casts its input, weight and bias to the autocast dtype and normalises in it
/// with autocast off (autocast would run group_norm in float32), so it returns that dtype. Without autocast it is
/// a GroupNorm.
class LPGroupNorm : public GroupNorm {
 public:
  LPGroupNorm(int64_t num_groups, int64_t num_channels, double eps = 1e-5, bool affine = true)
      : GroupNorm(num_groups, num_channels, eps, affine) {}
  at::Tensor forward(const at::Tensor& x) override;
};

}  // namespace nn

namespace functional {

/// Replaces every nn::GroupNorm of `model` by an nn::LPGroupNorm with the same weights (the optimizer, when given,
/// trains the new ones) when `precision` is amp_fp16 or amp_bf16; for fp32 it changes nothing and says so on
/// stderr, as Composer warns. Returns the replacements.
std::vector<Replacement> apply_low_precision_groupnorm(torch::nn::Module& model, Precision precision,
                                                       torch::optim::Optimizer* optimizer = nullptr);

}  // namespace functional

namespace algorithms {

using LowPrecisionGroupNormOptions = LowPrecisionNormOptions;

/// At apply_at: functional::apply_low_precision_groupnorm with the run's precision. Required on load.
class LowPrecisionGroupNorm : public LowPrecisionNorm {
 public:
  explicit LowPrecisionGroupNorm(LowPrecisionNormOptions options = LowPrecisionNormOptions());
};

}  // namespace algorithms
}  // namespace composer
