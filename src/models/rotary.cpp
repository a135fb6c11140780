#include "composer/models/rotary.h"

#include <ATen/ATen.h>

#include <cmath>
#include <stdexcept>

namespace composer::models {

void RopeScaling::validate() const {
  const auto fail = [](const std::string& field, const std::string& got, const std::string& expected) {
    throw std::invalid_argument("rope_scaling." + field + " is " + got + ", expected " + expected);
  };
  if (rope_type_ != "default" && rope_type_ != "linear" && rope_type_ != "llama3")
    fail("rope_type", "'" + rope_type_ + "'", "default, linear or llama3");
  if (!(factor_ > 0)) fail("factor", std::to_string(factor_), "> 0");
  if (rope_type_ == "llama3") {
    if (!(low_freq_factor_ > 0)) fail("low_freq_factor", std::to_string(low_freq_factor_), "> 0");
    if (!(high_freq_factor_ > low_freq_factor_))
      fail("high_freq_factor", std::to_string(high_freq_factor_), "> low_freq_factor");
    if (original_max_position_embeddings_ <= 0)
      fail("original_max_position_embeddings", std::to_string(original_max_position_embeddings_), "> 0");
  }
}

at::Tensor rope_inverse_frequencies(int64_t head_dim, double theta, const RopeScaling& s) {
  s.validate();
  // Hugging Face: 1 / theta ** (arange(0, dim, 2).float() / dim), in float32.
  const at::Tensor exponent = at::arange(0, head_dim, 2, at::kLong).to(at::kFloat) / static_cast<float>(head_dim);
  at::Tensor inv = 1.0 / at::pow(at::scalar_tensor(theta, at::kFloat), exponent);
  if (s.rope_type() == "linear") return inv / s.factor();
  if (s.rope_type() != "llama3") return inv;
  const double old_len = static_cast<double>(s.original_max_position_embeddings());
  const double low_wavelen = old_len / s.low_freq_factor(), high_wavelen = old_len / s.high_freq_factor();
  const at::Tensor wavelen = 2 * M_PI / inv;
  at::Tensor scaled = at::where(wavelen > low_wavelen, inv / s.factor(), inv);
  const at::Tensor smooth = (old_len / wavelen - s.low_freq_factor()) / (s.high_freq_factor() - s.low_freq_factor());
  const at::Tensor smoothed = (1 - smooth) * scaled / s.factor() + smooth * scaled;
  const at::Tensor medium = (wavelen >= high_wavelen).logical_and(wavelen <= low_wavelen);
  return at::where(medium, smoothed, scaled);
}

RotaryEmbedding::RotaryEmbedding(int64_t head_dim, double theta, RopeScaling scaling)
    : head_dim_(head_dim), inv_freq_(rope_inverse_frequencies(head_dim, theta, scaling)) {
  if (head_dim <= 0 || head_dim % 2 != 0)
    throw std::invalid_argument("rotary head_dim must be even and > 0, got " + std::to_string(head_dim));
}

std::pair<at::Tensor, at::Tensor> RotaryEmbedding::cos_sin(int64_t offset, int64_t len, const at::Device& device,
                                                           at::ScalarType dtype) {
  std::lock_guard<std::mutex> lock(mutex_);
  const int64_t need = offset + len;
  if (!cos_.defined() || cos_.size(0) < need || cos_.device() != device) {
    const int64_t rows = std::max<int64_t>(need, cos_.defined() ? 2 * cos_.size(0) : 256);
    const at::Tensor pos = at::arange(rows, at::kLong).to(at::kFloat).to(device);
    const at::Tensor freqs = at::outer(pos, inv_freq_.to(device));
    const at::Tensor emb = at::cat({freqs, freqs}, -1);
    cos_ = emb.cos();
    sin_ = emb.sin();
  }
  return {cos_.narrow(0, offset, len).to(dtype), sin_.narrow(0, offset, len).to(dtype)};
}

at::Tensor apply_rotary(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const int64_t half = x.size(-1) / 2;
  const at::Tensor rotated = at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
  return x * cos + rotated * sin;
}

}  // namespace composer::models
