#include "trainer/detail/bf16_probe.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>

namespace composer::detail {
namespace {

// The best of 3 timed runs after one warm-up, in seconds.
double best_time(const std::function<void()>& run) {
  run();
  double best = 1e30;
  for (int i = 0; i < 3; ++i) {
    const auto start = std::chrono::steady_clock::now();
    run();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

// A training step's share of the work: the forward and both gradients.
double ratio(const at::Tensor& a32, const at::Tensor& b32, bool conv) {
  const auto time_in = [&](at::ScalarType dtype) {
    const at::Tensor a = a32.to(dtype).requires_grad_(), b = b32.to(dtype).requires_grad_();
    return best_time([&] {
      const at::Tensor y = conv ? at::conv2d(a, b, {}, 1, 1) : at::matmul(a, b);
      y.sum().backward();
    });
  };
  return time_in(at::kBFloat16) / time_in(at::kFloat);
}

}  // namespace

Bf16Speed measure_cpu_bf16_speed() {
  at::AutoGradMode grad(true);
  const auto f32 = at::TensorOptions().dtype(at::kFloat);
  Bf16Speed speed;
  speed.conv_ratio = ratio(at::randn({8, 32, 28, 28}, f32), at::randn({32, 32, 3, 3}, f32), /*conv=*/true);
  speed.matmul_ratio = ratio(at::randn({256, 512}, f32), at::randn({512, 512}, f32), /*conv=*/false);
  return speed;
}

std::optional<std::string> bf16_warning(const Bf16Speed& speed) {
  if (speed.conv_ratio <= 1.5 && speed.matmul_ratio <= 1.5) return std::nullopt;
  char text[400];
  std::snprintf(text, sizeof(text),
                "precision amp_bf16 on this CPU: a bfloat16 convolution takes %.1fx and a matrix product %.1fx the "
                "float32 time (measured at start-up), so this run will likely be slower than in fp32; set precision "
                "fp32 unless you measured otherwise (docs/guide.md, Threads and memory)",
                speed.conv_ratio, speed.matmul_ratio);
  return std::string(text);
}

}  // namespace composer::detail
