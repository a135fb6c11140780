#include "composer/nn/max_pool.h"

#include <ATen/ATen.h>

namespace composer::nn {
namespace {

// The window maxima of a 2 x 2 pool at stride 2: the greater of each pair of rows, then of each pair of columns
// (rows and columns past the last whole window left out, as the pool leaves them). at::maximum propagates NaN, as
// the pool does, and picks one of its inputs, so the values are the pool's bit for bit.
at::Tensor pooled(const at::Tensor& x) {
  const int64_t h = x.size(-2) / 2 * 2, w = x.size(-1) / 2 * 2;
  const at::Tensor rows = at::maximum(x.slice(-2, 0, h, 2).slice(-1, 0, w), x.slice(-2, 1, h, 2).slice(-1, 0, w));
  return at::maximum(rows.slice(-1, 0, w, 2), rows.slice(-1, 1, w, 2));
}

bool strided_maxima_apply(const at::Tensor& x, int64_t kernel_size, int64_t stride, int64_t padding) {
  return kernel_size == 2 && stride == 2 && padding == 0 && x.is_cpu() && x.is_floating_point() &&
         (x.dim() == 3 || x.dim() == 4) && x.is_contiguous() && x.size(-2) >= 2 && x.size(-1) >= 2 &&
         !(at::GradMode::is_enabled() && x.requires_grad());
}

}  // namespace

at::Tensor max_pool2d(const at::Tensor& x, int64_t kernel_size, int64_t stride, int64_t padding) {
  if (strided_maxima_apply(x, kernel_size, stride, padding)) return pooled(x);
  return at::max_pool2d(x, {kernel_size, kernel_size}, {stride, stride}, {padding, padding});
}

}  // namespace composer::nn
