// Image operations for AugMix and RandAugment, on tensors (CPU or GPU) with PIL's semantics.
//
// Images are [C, H, W] or [N, C, H, W] (one set of parameters for the whole batch), uint8 in [0, 255] or floating
// point in [0, 1]; results keep the input's shape, dtype and device. Geometric operations sample bilinearly with
// PIL's pixel-centre convention and fill uncovered pixels with 0. Per-image statistics (autocontrast, equalize,
// contrast's mean) are taken per image and channel.
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <array>
#include <string>
#include <vector>

namespace composer::functional {

/// Stretches each channel so its minimum maps to 0 and its maximum to 255 (ImageOps.autocontrast, cutoff 0).
at::Tensor autocontrast(const at::Tensor& image);
/// Histogram equalization per channel with PIL's lookup table (ImageOps.equalize).
at::Tensor equalize(const at::Tensor& image);
/// Keeps the top `bits` bits of each 8-bit value (ImageOps.posterize), bits in [0, 8].
at::Tensor posterize(const at::Tensor& image, int64_t bits);
/// Inverts values >= threshold: v -> 255 - v (ImageOps.solarize).
at::Tensor solarize(const at::Tensor& image, int64_t threshold);
/// PIL's Image.transform(AFFINE, (a, b, c, d, e, f)): output pixel (x, y) samples the input at
/// (a x + b y + c, d x + e y + f).
at::Tensor affine(const at::Tensor& image, const std::array<double, 6>& coefficients);
/// Counter-clockwise rotation about the centre (Image.rotate).
at::Tensor rotate(const at::Tensor& image, double degrees);
at::Tensor shear_x(const at::Tensor& image, double factor);
at::Tensor shear_y(const at::Tensor& image, double factor);
/// Shifts content left by `pixels` (PIL's translate sign).
at::Tensor translate_x(const at::Tensor& image, double pixels);
at::Tensor translate_y(const at::Tensor& image, double pixels);
/// ImageEnhance: blend of the image with a degenerate one, degenerate + factor * (image - degenerate), clipped.
/// Color: the grayscale image (identity for one channel); contrast: the grayscale mean; brightness: black;
/// sharpness: the 3x3 SMOOTH filter (border pixels unchanged).
at::Tensor color(const at::Tensor& image, double factor);
at::Tensor contrast(const at::Tensor& image, double factor);
at::Tensor brightness(const at::Tensor& image, double factor);
at::Tensor sharpness(const at::Tensor& image, double factor);

/// The operations AugMix and RandAugment draw from.
enum class Augmentation {
  AUTO_CONTRAST,
  EQUALIZE,
  POSTERIZE,
  ROTATE,
  SOLARIZE,
  SHEAR_X,
  SHEAR_Y,
  TRANSLATE_X,
  TRANSLATE_Y,
  COLOR,
  CONTRAST,
  BRIGHTNESS,
  SHARPNESS
};
std::string to_string(Augmentation op);
/// "all" (all thirteen) or "safe" (the first nine: no color, contrast, brightness or sharpness, which overlap
/// common test-time corruptions). Throws naming the set otherwise.
std::vector<Augmentation> augmentation_set(const std::string& name);

/// Applies `op` at a random strength as Composer's primitives do: level ~ U(0.1, severity) mapped to each op's range
/// (rotate 30 degrees, shear 0.3, translate a third of the side, posterize 4 bits, solarize 256, enhance factor
/// 0.1-1.9), with a random sign for geometric ops. severity in [0, 10].
at::Tensor augment(const at::Tensor& image, Augmentation op, double severity, at::Generator& gen);
/// `depth` operations, each drawn uniformly from `ops` and applied with augment() (RandAugment's sequence; one
/// AugMix chain).
at::Tensor augment_chain(const at::Tensor& image, const std::vector<Augmentation>& ops, int64_t depth, double severity,
                         at::Generator& gen);

}  // namespace composer::functional
