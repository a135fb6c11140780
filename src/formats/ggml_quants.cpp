// ggml's block formats, dequantized as llama.cpp's reference (ggml-quants.c) does. Blocks of 32 values (Q4_0 .. Q8_0)
// or 256 (the K-quants, whose sub-blocks carry 6-bit scales and minimums); every scale is an IEEE half.
#include "composer/formats/gguf.h"

#include <ATen/Parallel.h>
#include <c10/util/Half.h>

#include <cstring>
#include <stdexcept>

namespace composer::formats {
namespace {

constexpr int64_t kQK = 32;    // values per block, Q4_0 .. Q8_0
constexpr int64_t kQKK = 256;  // values per block, K-quants

float half(const unsigned char* p) {
  uint16_t bits = 0;
  std::memcpy(&bits, p, 2);
  return c10::detail::fp16_ieee_to_fp32_value(bits);
}

struct Layout {
  int64_t block;  // values per block
  int64_t bytes;  // bytes per block
};

bool layout_of(uint32_t type, Layout& out) {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::F32:
      out = {1, 4};
      return true;
    case GgmlType::F16:
      out = {1, 2};
      return true;
    case GgmlType::BF16:
      out = {1, 2};
      return true;
    case GgmlType::Q4_0:
      out = {kQK, 2 + 16};
      return true;
    case GgmlType::Q4_1:
      out = {kQK, 4 + 16};
      return true;
    case GgmlType::Q5_0:
      out = {kQK, 2 + 4 + 16};
      return true;
    case GgmlType::Q5_1:
      out = {kQK, 4 + 4 + 16};
      return true;
    case GgmlType::Q8_0:
      out = {kQK, 2 + 32};
      return true;
    case GgmlType::Q4_K:
      out = {kQKK, 4 + 12 + 128};
      return true;
    case GgmlType::Q5_K:
      out = {kQKK, 4 + 12 + 32 + 128};
      return true;
    case GgmlType::Q6_K:
      out = {kQKK, 128 + 64 + 16 + 2};
      return true;
    default:
      return false;
  }
}

Layout layout(uint32_t type) {
  Layout l{};
  if (!layout_of(type, l)) {
    throw std::invalid_argument("ggml type " + ggml_type_name(type) +
                                " cannot be read (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K can)");
  }
  return l;
}

// Q4_0 (d, 16 bytes of nibbles) and Q4_1 (d, m, nibbles): value j from the low nibble of byte j, j + 16 from the high.
void q4(const unsigned char* b, float* y, bool with_min) {
  const float d = half(b), m = with_min ? half(b + 2) : -8.0f * d;
  const unsigned char* qs = b + (with_min ? 4 : 2);
  for (int j = 0; j < 16; ++j) {
    y[j] = static_cast<float>(qs[j] & 0x0F) * d + m;
    y[j + 16] = static_cast<float>(qs[j] >> 4) * d + m;
  }
}

// Q5_0 / Q5_1: as Q4 with a fifth bit per value from the 32-bit qh.
void q5(const unsigned char* b, float* y, bool with_min) {
  const float d = half(b), m = with_min ? half(b + 2) : -16.0f * d;
  const unsigned char* p = b + (with_min ? 4 : 2);
  uint32_t qh = 0;
  std::memcpy(&qh, p, 4);
  const unsigned char* qs = p + 4;
  for (int j = 0; j < 16; ++j) {
    const uint32_t h0 = ((qh >> j) << 4) & 0x10, h1 = (qh >> (j + 12)) & 0x10;
    y[j] = static_cast<float>((qs[j] & 0x0F) | h0) * d + m;
    y[j + 16] = static_cast<float>((qs[j] >> 4) | h1) * d + m;
  }
}

void q8_0(const unsigned char* b, float* y) {
  const float d = half(b);
  for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(static_cast<int8_t>(b[2 + j])) * d;
}

// The 6-bit scale and minimum of sub-block j from the 12 packed bytes of a Q4_K / Q5_K block.
void scale_min_k4(int j, const unsigned char* q, int& sc, int& m) {
  if (j < 4) {
    sc = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    sc = (q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4);
    m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// Q4_K (high_bits null) and Q5_K: 8 sub-blocks of 32, each d * scale * q - dmin * min.
void qk_4_5(const unsigned char* b, float* y, bool five_bits) {
  const float d = half(b), dmin = half(b + 2);
  const unsigned char* scales = b + 4;
  const unsigned char* qh = five_bits ? b + 16 : nullptr;
  const unsigned char* ql = b + (five_bits ? 48 : 16);
  int is = 0;
  unsigned u1 = 1, u2 = 2;
  for (int j = 0; j < kQKK; j += 64, ql += 32, is += 2, u1 <<= 2, u2 <<= 2) {
    int sc = 0, m = 0;
    scale_min_k4(is, scales, sc, m);
    const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
    scale_min_k4(is + 1, scales, sc, m);
    const float d2 = d * static_cast<float>(sc), m2 = dmin * static_cast<float>(m);
    for (int l = 0; l < 32; ++l) {
      const int hi = qh && (qh[l] & u1) ? 16 : 0;
      *y++ = d1 * static_cast<float>((ql[l] & 0x0F) + hi) - m1;
    }
    for (int l = 0; l < 32; ++l) {
      const int hi = qh && (qh[l] & u2) ? 16 : 0;
      *y++ = d2 * static_cast<float>((ql[l] >> 4) + hi) - m2;
    }
  }
}

// Q6_K: 16 sub-blocks of 16 with int8 scales; each value 4 low bits in ql and 2 high bits in qh, minus 32.
void q6_k(const unsigned char* b, float* y) {
  const unsigned char* ql = b;
  const unsigned char* qh = b + 128;
  const auto* sc = reinterpret_cast<const int8_t*>(b + 192);
  const float d = half(b + 208);
  for (int n = 0; n < kQKK; n += 128, y += 128, ql += 64, qh += 32, sc += 8) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = ((ql[l] & 0x0F) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l] = d * static_cast<float>(sc[is]) * static_cast<float>(q1);
      y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
      y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
      y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
    }
  }
}

void block(GgmlType type, const unsigned char* b, float* y) {
  switch (type) {
    case GgmlType::F32:
      std::memcpy(y, b, 4);
      return;
    case GgmlType::F16:
      *y = half(b);
      return;
    case GgmlType::BF16: {
      uint16_t bits = 0;
      std::memcpy(&bits, b, 2);
      const uint32_t f = static_cast<uint32_t>(bits) << 16;
      std::memcpy(y, &f, 4);
      return;
    }
    case GgmlType::Q4_0:
      q4(b, y, false);
      return;
    case GgmlType::Q4_1:
      q4(b, y, true);
      return;
    case GgmlType::Q5_0:
      q5(b, y, false);
      return;
    case GgmlType::Q5_1:
      q5(b, y, true);
      return;
    case GgmlType::Q8_0:
      q8_0(b, y);
      return;
    case GgmlType::Q4_K:
      qk_4_5(b, y, false);
      return;
    case GgmlType::Q5_K:
      qk_4_5(b, y, true);
      return;
    case GgmlType::Q6_K:
      q6_k(b, y);
      return;
    default:
      throw std::logic_error("unreachable: layout() accepted the type");
  }
}

}  // namespace

std::string ggml_type_name(uint32_t type) {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::F32:
      return "F32";
    case GgmlType::F16:
      return "F16";
    case GgmlType::Q4_0:
      return "Q4_0";
    case GgmlType::Q4_1:
      return "Q4_1";
    case GgmlType::Q5_0:
      return "Q5_0";
    case GgmlType::Q5_1:
      return "Q5_1";
    case GgmlType::Q8_0:
      return "Q8_0";
    case GgmlType::Q8_1:
      return "Q8_1";
    case GgmlType::Q2_K:
      return "Q2_K";
    case GgmlType::Q3_K:
      return "Q3_K";
    case GgmlType::Q4_K:
      return "Q4_K";
    case GgmlType::Q5_K:
      return "Q5_K";
    case GgmlType::Q6_K:
      return "Q6_K";
    case GgmlType::Q8_K:
      return "Q8_K";
    case GgmlType::BF16:
      return "BF16";
  }
  return "type " + std::to_string(type);
}

int64_t ggml_block_size(uint32_t type) { return layout(type).block; }

uint64_t ggml_nbytes(uint32_t type, int64_t count) {
  const Layout l = layout(type);
  if (count < 0 || count % l.block != 0) {
    throw std::invalid_argument(std::to_string(count) + " values of " + ggml_type_name(type) +
                                " are not whole blocks of " + std::to_string(l.block));
  }
  return static_cast<uint64_t>(count / l.block) * static_cast<uint64_t>(l.bytes);
}

void dequantize(uint32_t type, const unsigned char* src, float* dst, int64_t count) {
  const Layout l = layout(type);
  ggml_nbytes(type, count);  // whole blocks
  const auto t = static_cast<GgmlType>(type);
  if (t == GgmlType::F32) {
    std::memcpy(dst, src, static_cast<size_t>(count) * 4);
    return;
  }
  at::parallel_for(0, count / l.block, 1024, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) block(t, src + i * l.bytes, dst + i * l.block);
  });
}

}  // namespace composer::formats
