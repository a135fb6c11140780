// Every difference between Debian's LibTorch 1.13 and LibTorch 2.4+ lives in this header.
// Contract: code elsewhere in the library never tests TORCH_VERSION_* itself; it calls what is declared here.
#pragma once

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <torch/version.h>

#include <cmath>
#include <limits>
#include <string>

#define COMPOSER_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

// at::_fused_adamw_ / at::_fused_sgd_ (CUDA kernels the Python optimizers use with fused=True).
#define COMPOSER_HAS_FUSED_OPTIM COMPOSER_TORCH_AT_LEAST(2, 4)
// at::scaled_dot_product_attention (1.13 only has the private _scaled_dot_product_attention).
#define COMPOSER_HAS_SDPA COMPOSER_TORCH_AT_LEAST(2, 0)

// c10d backends: Gloo needs its headers (Debian's libgloo-dev; the PyTorch 2.x wheel ships none), NCCL needs a
// CUDA build with USE_C10D_NCCL.
#if defined(USE_DISTRIBUTED) && defined(USE_C10D_GLOO) && __has_include(<gloo/algorithm.h>)
#define COMPOSER_HAS_GLOO 1
#else
#define COMPOSER_HAS_GLOO 0
#endif
#if defined(USE_DISTRIBUTED) && defined(USE_C10D_NCCL)
#define COMPOSER_HAS_NCCL 1
#else
#define COMPOSER_HAS_NCCL 0
#endif

namespace composer::compat {

/// Whether autocast is on for `device` (kCPU or kCUDA).
inline bool autocast_enabled(c10::DeviceType device) {
#if COMPOSER_TORCH_AT_LEAST(2, 4)
  return at::autocast::is_autocast_enabled(device);
#else
  return device == c10::kCPU ? at::autocast::is_cpu_enabled() : at::autocast::is_enabled();
#endif
}

inline void set_autocast_enabled(c10::DeviceType device, bool on) {
#if COMPOSER_TORCH_AT_LEAST(2, 4)
  at::autocast::set_autocast_enabled(device, on);
#else
  if (device == c10::kCPU) {
    at::autocast::set_cpu_enabled(on);
  } else {
    at::autocast::set_enabled(on);
  }
#endif
}

inline at::ScalarType autocast_dtype(c10::DeviceType device) {
#if COMPOSER_TORCH_AT_LEAST(2, 4)
  return at::autocast::get_autocast_dtype(device);
#else
  return device == c10::kCPU ? at::autocast::get_autocast_cpu_dtype() : at::autocast::get_autocast_gpu_dtype();
#endif
}

inline void set_autocast_dtype(c10::DeviceType device, at::ScalarType dtype) {
#if COMPOSER_TORCH_AT_LEAST(2, 4)
  at::autocast::set_autocast_dtype(device, dtype);
#else
  if (device == c10::kCPU) {
    at::autocast::set_autocast_cpu_dtype(dtype);
  } else {
    at::autocast::set_autocast_gpu_dtype(dtype);
  }
#endif
}

/// RAII equivalent of `with torch.autocast(device, dtype)`. On exit the outermost guard clears the autocast
/// weight cache: cached low-precision copies of the weights would otherwise go stale after an optimizer step.
class AutocastGuard {
 public:
  AutocastGuard(c10::DeviceType device, at::ScalarType dtype)
      : device_(device), was_enabled_(autocast_enabled(device)), previous_dtype_(autocast_dtype(device)) {
    set_autocast_enabled(device, true);
    set_autocast_dtype(device, dtype);
    at::autocast::increment_nesting();
  }
  ~AutocastGuard() {
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    set_autocast_enabled(device_, was_enabled_);
    set_autocast_dtype(device_, previous_dtype_);
  }
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  c10::DeviceType device_;
  bool was_enabled_;
  at::ScalarType previous_dtype_;
};

/// Multi-head attention over [B, H, L, D] tensors: softmax(q k^T / sqrt(D) [+ causal mask]) v.
/// LibTorch >= 2.0: at::scaled_dot_product_attention (flash / memory-efficient kernels on CUDA); 1.13: plain ops.
inline at::Tensor attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal) {
#if COMPOSER_HAS_SDPA
  return at::scaled_dot_product_attention(q, k, v, {}, 0.0, causal);
#else
  at::Tensor scores = at::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(q.size(-1)));
  if (causal) {
    const int64_t l = q.size(-2), s = k.size(-2);
    const at::Tensor mask = at::ones({l, s}, q.options().dtype(at::kBool)).triu(s - l + 1);
    scores = scores.masked_fill(mask, -std::numeric_limits<float>::infinity());
  }
  return at::matmul(at::softmax(scores, -1), v);
#endif
}

/// Drops a parameter's entry from a torch::optim optimizer's state (keyed by the TensorImpl address printed as a
/// string in 1.13, by the address itself in 2.x). A template so this header need not include the optimizer API.
template <class Optimizer>
void erase_optimizer_state(Optimizer& optimizer, const at::Tensor& param) {
#if COMPOSER_TORCH_AT_LEAST(2, 0)
  optimizer.state().erase(param.unsafeGetTensorImpl());
#else
  optimizer.state().erase(c10::guts::to_string(param.unsafeGetTensorImpl()));
#endif
}

/// The LibTorch version as "MAJOR.MINOR.PATCH" (recorded in checkpoint metadata and hparams).
inline std::string torch_version() { return TORCH_VERSION; }

}  // namespace composer::compat
