#include "composer/nn/rms_norm.h"

#include "composer/nn/deferred_init.h"

#include <ATen/ATen.h>

namespace composer::nn {

RMSNorm::RMSNorm(int64_t dim_, double eps_) : dim(dim_), eps(eps_) {
  weight = register_parameter("weight", new_parameter({dim}));
  initialize(
      weight, [](at::Tensor& w) { w.fill_(1); }, false);
}

at::Tensor RMSNorm::forward(const at::Tensor& x) {
  // As Hugging Face's LlamaRMSNorm: normalise in float32, cast back to the input's dtype, then scale by the weight.
  const at::Tensor h = x.to(at::kFloat);
  const at::Tensor normed = h * at::rsqrt(h.pow(2).mean(-1, /*keepdim=*/true) + eps);
  return weight * normed.to(x.scalar_type());
}

}  // namespace composer::nn
