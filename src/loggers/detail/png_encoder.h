// PNG encoding (libpng) of an 8-bit image, and the pixel conversion the image loggers share.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

namespace composer::detail {

/// pixels: height x width x channels bytes, row-major, channels 1 (gray), 3 (RGB) or 4 (RGBA). Returns the PNG file's
/// bytes; throws std::invalid_argument on other channel counts or an empty image.
std::string encode_png(const uint8_t* pixels, int height, int width, int channels);
/// The same for an [H, W, C] uint8 CPU tensor.
std::string encode_png(const at::Tensor& hwc);

/// `image` on the CPU as uint8: uint8 as it is, a floating type taken as 0..1 (times 255, clamped, truncated, as
/// torch's SummaryWriter). Other dtypes: std::invalid_argument "<who>: dtype <T>, expected a float type (0..1) or
/// uint8".
at::Tensor to_uint8_pixels(const at::Tensor& image, const std::string& who);

}  // namespace composer::detail
