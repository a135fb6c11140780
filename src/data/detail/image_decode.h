// Compressed images in MDS shards (Streaming's 'jpeg', 'png' and their lists), decoded as PIL opens them.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <string_view>

namespace composer::detail {

/// A JPEG decoded by libjpeg-turbo with PIL's settings (accurate integer DCT, smooth chroma upsampling): uint8
/// [1, H, W] for grayscale, [3, H, W] RGB for color. CMYK is an error. `where` names the value in errors.
at::Tensor decode_jpeg(std::string_view bytes, const std::string& where);

/// A PNG decoded by libpng: uint8 [C, H, W] with C = 1 (gray), 2 (gray + alpha), 3 (RGB) or 4 (RGBA). A palette image
/// is expanded to RGB (RGBA when it has transparency), where PIL would keep the palette indices; 16-bit samples are
/// an error. `where` names the value in errors.
at::Tensor decode_png(std::string_view bytes, const std::string& where);

}  // namespace composer::detail
