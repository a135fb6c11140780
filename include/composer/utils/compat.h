// Every difference between LibTorch versions (2.4 to 2.11+) lives in this header.
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

#if !COMPOSER_TORCH_AT_LEAST(2, 4)
#error "Composer C++ needs LibTorch 2.4 or newer"
#endif

// c10d backends. Gloo is inside every LibTorch build with USE_C10D_GLOO, but the PyTorch wheel ships no gloo/*.h for
// ProcessGroupGloo.hpp; Debian's libgloo-dev supplies them (docs/distributed.md says why that is safe). NCCL needs a
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
inline bool autocast_enabled(c10::DeviceType device) { return at::autocast::is_autocast_enabled(device); }

inline void set_autocast_enabled(c10::DeviceType device, bool on) { at::autocast::set_autocast_enabled(device, on); }

inline at::ScalarType autocast_dtype(c10::DeviceType device) { return at::autocast::get_autocast_dtype(device); }

inline void set_autocast_dtype(c10::DeviceType device, at::ScalarType dtype) {
  at::autocast::set_autocast_dtype(device, dtype);
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

/// RAII equivalent of `with torch.autocast(device, enabled=False)` inside an autocast region: low-precision norms
/// (LPLayerNorm, LPGroupNorm) run their op in the dtype they cast to instead of autocast's float32.
class AutocastOff {
 public:
  explicit AutocastOff(c10::DeviceType device) : device_(device), was_enabled_(autocast_enabled(device)) {
    set_autocast_enabled(device_, false);
  }
  ~AutocastOff() { set_autocast_enabled(device_, was_enabled_); }
  AutocastOff(const AutocastOff&) = delete;
  AutocastOff& operator=(const AutocastOff&) = delete;

 private:
  c10::DeviceType device_;
  bool was_enabled_;
};

/// Multi-head attention over [B, H, L, D] tensors: softmax(q k^T / sqrt(D) [+ causal mask]) v.
/// at::scaled_dot_product_attention (flash / memory-efficient kernels on CUDA).
inline at::Tensor attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal) {
  return at::scaled_dot_product_attention(q, k, v, {}, 0.0, causal);
}

/// Drops a parameter's entry from a torch::optim optimizer's state (keyed by the TensorImpl address). A template so
/// this header need not include the optimizer API.
template <class Optimizer>
void erase_optimizer_state(Optimizer& optimizer, const at::Tensor& param) {
  optimizer.state().erase(param.unsafeGetTensorImpl());
}

/// The LibTorch version as "MAJOR.MINOR.PATCH" (recorded in checkpoint metadata and hparams).
inline std::string torch_version() { return TORCH_VERSION; }

}  // namespace composer::compat
