// Rotary position embeddings as Hugging Face computes them for Llama-family models: inverse frequencies
// theta^(-2i/d), optionally rescaled ("linear" or "llama3" rope_scaling), and cos/sin tables over cat(freqs, freqs)
// applied with rotate_half (the halves layout, not llama.cpp's interleaved pairs).
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/arg.h>

#include <mutex>
#include <string>
#include <utility>

namespace composer::models {

/// Hugging Face's rope_scaling dictionary. rope_type "default" (no scaling), "linear" (positions divided by factor)
/// or "llama3" (low frequencies divided by factor, high ones kept, a smooth ramp between).
struct RopeScaling {
  TORCH_ARG(std::string, rope_type) = "default";
  TORCH_ARG(double, factor) = 1.0;
  TORCH_ARG(double, low_freq_factor) = 1.0;
  TORCH_ARG(double, high_freq_factor) = 4.0;
  TORCH_ARG(int64_t, original_max_position_embeddings) = 8192;

 public:
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("rope_type", self.rope_type_, "default, linear or llama3");
    visit("factor", self.factor_, "context extension factor");
    visit("low_freq_factor", self.low_freq_factor_, "llama3: wavelengths above original/low_freq_factor are scaled");
    visit("high_freq_factor", self.high_freq_factor_, "llama3: wavelengths below original/high_freq_factor are kept");
    visit("original_max_position_embeddings", self.original_max_position_embeddings_,
          "llama3: the context length of pretraining");
  }
  /// Throws std::invalid_argument naming the field (an unknown rope_type, factor <= 0, ...).
  void validate() const;
};

/// Float32 inverse frequencies [head_dim / 2] for `theta` and `scaling`.
at::Tensor rope_inverse_frequencies(int64_t head_dim, double theta, const RopeScaling& scaling);

/// cos and sin tables, [len, head_dim] each, for positions offset .. offset + len - 1, cached and grown on demand.
class RotaryEmbedding {
 public:
  RotaryEmbedding(int64_t head_dim, double theta, RopeScaling scaling);
  /// Tables on `device` in `dtype` (computed in float32, as Hugging Face does, then cast).
  std::pair<at::Tensor, at::Tensor> cos_sin(int64_t offset, int64_t len, const at::Device& device,
                                            at::ScalarType dtype);
  int64_t head_dim() const { return head_dim_; }

 private:
  int64_t head_dim_;
  at::Tensor inv_freq_;
  at::Tensor cos_, sin_;  // float32, [cached positions, head_dim], on the last device asked for
  std::mutex mutex_;
};

/// x * cos + rotate_half(x) * sin for x [B, H, L, D] and tables [L, D]; rotate_half(x) = cat(-x2, x1).
at::Tensor apply_rotary(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);

}  // namespace composer::models
