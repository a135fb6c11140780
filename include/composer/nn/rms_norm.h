// Root-mean-square layer normalisation (Llama's, Hugging Face's LlamaRMSNorm and torch.nn.RMSNorm with a weight):
// x / sqrt(mean(x^2) + eps) * weight over the last dimension, computed in float32 and returned in x's dtype.
#pragma once

#include "composer/nn/layer.h"

namespace composer::nn {

class RMSNorm : public Layer {
 public:
  explicit RMSNorm(int64_t dim, double eps = 1e-6);
  at::Tensor forward(const at::Tensor& x) override;
  int64_t dim;
  double eps;
  at::Tensor weight;  ///< ones at construction
};

}  // namespace composer::nn
