// PNG encoding (libpng) of an 8-bit image, for image summaries.
#pragma once

#include <cstdint>
#include <string>

namespace composer::detail {

/// pixels: height x width x channels bytes, row-major, channels 1 (gray), 3 (RGB) or 4 (RGBA). Returns the PNG file's
/// bytes; throws std::invalid_argument on other channel counts or an empty image.
std::string encode_png(const uint8_t* pixels, int height, int width, int channels);

}  // namespace composer::detail
