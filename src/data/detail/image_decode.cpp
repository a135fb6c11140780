#include "data/detail/image_decode.h"

#include <ATen/ATen.h>
#include <png.h>

// jpeglib.h needs size_t and FILE declared first.
#include <jpeglib.h>
#include <csetjmp>
#include <cstdio>

#include <stdexcept>

namespace composer::detail {

namespace {

/// libjpeg's error manager, made to jump back instead of calling exit(): the C library cannot unwind C++ frames.
struct JpegError {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void jpeg_on_error(j_common_ptr info) {
  auto* err = reinterpret_cast<JpegError*>(info->err);
  (*info->err->format_message)(info, err->message);
  std::longjmp(err->jump, 1);
}

void jpeg_no_output(j_common_ptr) {}

/// Everything between setjmp and the last libjpeg call: plain C data only, so a longjmp out of it skips no
/// destructor. Returns "" or libjpeg's message.
const char* jpeg_decode_into(jpeg_decompress_struct* cinfo, JpegError* err, const std::string_view bytes,
                             at::Tensor* out, int* components) {
  if (setjmp(err->jump)) return err->message;
  jpeg_create_decompress(cinfo);
  jpeg_mem_src(cinfo, reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(cinfo, TRUE);
  *components = cinfo->num_components;
  if (cinfo->jpeg_color_space == JCS_CMYK || cinfo->jpeg_color_space == JCS_YCCK) return "";
  cinfo->out_color_space = cinfo->num_components == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_start_decompress(cinfo);
  const int64_t h = cinfo->output_height, w = cinfo->output_width, c = cinfo->output_components;
  // Allocating can throw; libjpeg holds only its own memory at this point, freed by jpeg_destroy_decompress.
  *out = at::empty({h, w, c}, at::kByte);
  auto* base = out->data_ptr<uint8_t>();
  while (cinfo->output_scanline < cinfo->output_height) {
    JSAMPROW row = base + static_cast<int64_t>(cinfo->output_scanline) * w * c;
    jpeg_read_scanlines(cinfo, &row, 1);
  }
  jpeg_finish_decompress(cinfo);
  return "";
}

}  // namespace

at::Tensor decode_jpeg(std::string_view bytes, const std::string& where) {
  jpeg_decompress_struct cinfo{};
  JpegError err{};
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = jpeg_on_error;
  err.mgr.output_message = jpeg_no_output;
  at::Tensor hwc;
  int components = 0;
  std::string message;
  try {
    message = jpeg_decode_into(&cinfo, &err, bytes, &hwc, &components);
  } catch (...) {  // the tensor's allocation
    jpeg_destroy_decompress(&cinfo);
    throw;
  }
  const bool cmyk = cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK;
  jpeg_destroy_decompress(&cinfo);
  if (!message.empty()) throw std::runtime_error(where + ": not a readable JPEG (" + message + ")");
  if (cmyk) throw std::runtime_error(where + ": a CMYK JPEG; expected grayscale or color (YCbCr/RGB)");
  return hwc.permute({2, 0, 1}).contiguous();
}

at::Tensor decode_png(std::string_view bytes, const std::string& where) {
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  auto fail = [&](const std::string& what) -> at::Tensor {
    const std::string message = image.message;
    png_image_free(&image);
    throw std::runtime_error(where + ": " + what + (message.empty() ? "" : " (" + message + ")"));
  };
  if (!png_image_begin_read_from_memory(&image, bytes.data(), bytes.size())) return fail("not a readable PNG");
  if (image.format & PNG_FORMAT_FLAG_LINEAR) {
    png_image_free(&image);
    throw std::runtime_error(where + ": a 16-bit PNG; expected 8 bits per sample");
  }
  // Keep gray or color and alpha as stored; a palette becomes RGB(A).
  image.format &= ~static_cast<png_uint_32>(PNG_FORMAT_FLAG_COLORMAP);
  const int64_t c = PNG_IMAGE_SAMPLE_CHANNELS(image.format), h = image.height, w = image.width;
  at::Tensor hwc = at::empty({h, w, c}, at::kByte);
  if (!png_image_finish_read(&image, nullptr, hwc.data_ptr(), 0, nullptr)) return fail("a damaged PNG");
  return hwc.permute({2, 0, 1}).contiguous();
}

}  // namespace composer::detail
