#include "loggers/detail/png_encoder.h"

#include <ATen/ATen.h>
#include <png.h>

#include <stdexcept>
#include <vector>

namespace composer::detail {

namespace {

void append_to_string(png_structp png, png_bytep data, png_size_t length) {
  auto* out = static_cast<std::string*>(png_get_io_ptr(png));
  out->append(reinterpret_cast<const char*>(data), length);
}

void no_flush(png_structp) {}

[[noreturn]] void on_error(png_structp, png_const_charp message) {
  throw std::runtime_error(std::string("PNG encoding failed: ") + message);
}

void on_warning(png_structp, png_const_charp) {}

}  // namespace

std::string encode_png(const uint8_t* pixels, int height, int width, int channels) {
  if (height <= 0 || width <= 0)
    throw std::invalid_argument("encode_png: image is " + std::to_string(height) + "x" + std::to_string(width) +
                                ", expected a positive height and width");
  int color_type = 0;
  switch (channels) {
    case 1:
      color_type = PNG_COLOR_TYPE_GRAY;
      break;
    case 3:
      color_type = PNG_COLOR_TYPE_RGB;
      break;
    case 4:
      color_type = PNG_COLOR_TYPE_RGBA;
      break;
    default:
      throw std::invalid_argument("encode_png: " + std::to_string(channels) +
                                  " channels, expected 1 (gray), 3 (RGB) or 4 (RGBA)");
  }
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, on_error, on_warning);
  if (!png) throw std::runtime_error("encode_png: png_create_write_struct failed");
  png_infop info = png_create_info_struct(png);
  std::string out;
  try {
    if (!info) throw std::runtime_error("encode_png: png_create_info_struct failed");
    png_set_write_fn(png, &out, append_to_string, no_flush);
    png_set_IHDR(png, info, static_cast<png_uint_32>(width), static_cast<png_uint_32>(height), 8, color_type,
                 PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    std::vector<png_bytep> rows(static_cast<size_t>(height));
    const size_t stride = static_cast<size_t>(width) * static_cast<size_t>(channels);
    for (int y = 0; y < height; ++y) rows[y] = const_cast<png_bytep>(pixels + stride * static_cast<size_t>(y));
    png_set_rows(png, info, rows.data());
    png_write_png(png, info, PNG_TRANSFORM_IDENTITY, nullptr);
  } catch (...) {
    png_destroy_write_struct(&png, &info);
    throw;
  }
  png_destroy_write_struct(&png, &info);
  return out;
}

std::string encode_png(const at::Tensor& hwc) {
  return encode_png(hwc.data_ptr<uint8_t>(), static_cast<int>(hwc.size(0)), static_cast<int>(hwc.size(1)),
                    static_cast<int>(hwc.size(2)));
}

at::Tensor to_uint8_pixels(const at::Tensor& image, const std::string& who) {
  at::Tensor t = image.detach().to(at::kCPU);
  if (t.scalar_type() == at::kByte) return t;
  if (at::isFloatingType(t.scalar_type())) return (t.to(at::kFloat) * 255.0).clamp(0, 255).to(at::kByte);
  throw std::invalid_argument(who + ": dtype " + c10::toString(t.scalar_type()) +
                              ", expected a float type (0..1) or uint8");
}

}  // namespace composer::detail
