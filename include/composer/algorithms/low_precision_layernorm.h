// LowPrecisionLayerNorm: LayerNorms that run in the autocast dtype instead of float32 (Composer's
// LowPrecisionLayerNorm and LPLayerNorm), and RMSNorms too (llm-foundry's LPRMSNorm, for Llama-family models).
#pragma once

#include "composer/algorithms/low_precision_norm.h"
#include "composer/algorithms/module_surgery.h"
#include "composer/core/precision.h"
#include "composer/nn/layers.h"
#include "composer/nn/rms_norm.h"

#include <vector>

namespace composer {
namespace nn {

/// A LayerNorm that, under autocast, casts its input, weight and bias to the autocast dtype and normalises in it
/// with autocast off (autocast would run layer_norm in float32), so it returns that dtype. Without autocast it is
/// a LayerNorm.
class LPLayerNorm : public LayerNorm {
 public:
  LPLayerNorm(int64_t dim, double eps = 1e-5) : LayerNorm(dim, eps) {}
  at::Tensor forward(const at::Tensor& x) override;
};

/// An RMSNorm that, under autocast, casts its input and weight to the autocast dtype and normalises in it with
/// autocast off, returning the input's dtype (llm-foundry's LPRMSNorm). Without autocast it is an RMSNorm.
class LPRMSNorm : public RMSNorm {
 public:
  LPRMSNorm(int64_t dim, double eps = 1e-6) : RMSNorm(dim, eps) {}
  at::Tensor forward(const at::Tensor& x) override;
};

}  // namespace nn

namespace functional {

/// Replaces every nn::LayerNorm of `model` by an nn::LPLayerNorm, and every nn::RMSNorm by an nn::LPRMSNorm, with
/// the same weights (the optimizer, when given, trains the new ones) when `precision` is amp_fp16 or amp_bf16; for
/// fp32 it changes nothing and says so on stderr, as Composer warns. Returns the replacements.
std::vector<Replacement> apply_low_precision_layernorm(torch::nn::Module& model, Precision precision,
                                                       torch::optim::Optimizer* optimizer = nullptr);

}  // namespace functional

namespace algorithms {

using LowPrecisionLayerNormOptions = LowPrecisionNormOptions;

/// At apply_at: functional::apply_low_precision_layernorm with the run's precision. Required on load.
class LowPrecisionLayerNorm : public LowPrecisionNorm {
 public:
  explicit LowPrecisionLayerNorm(LowPrecisionNormOptions options = LowPrecisionNormOptions());
};

}  // namespace algorithms
}  // namespace composer
