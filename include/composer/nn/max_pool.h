#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace composer::nn {

/// at::max_pool2d(x, kernel_size, stride, padding), bit for bit. Where no gradient is recorded (evaluation,
/// prediction, a no-grad forward) on the CPU, a window of 2 at stride 2 without padding over a contiguous (NCHW)
/// floating-point tensor is computed from the maxima of its strided rows and columns: LibTorch's NCHW kernel also
/// works out every window's index, one element at a time, and took 9.1 ms for a 128 x 32 x 28 x 28 batch on the
/// 2-core VM against 0.54 ms this way (the Fashion-MNIST CNN's evaluation: bench/results/time_to_accuracy.md).
/// Under autograd, and for other shapes, layouts and devices, it is at::max_pool2d.
at::Tensor max_pool2d(const at::Tensor& x, int64_t kernel_size, int64_t stride, int64_t padding = 0);

}  // namespace composer::nn
