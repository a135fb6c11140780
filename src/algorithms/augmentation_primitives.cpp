#include "composer/algorithms/augmentation_primitives.h"

#include "algorithms/detail/common.h"

#include <torch/torch.h>

#include <cmath>
#include <stdexcept>

namespace composer::functional {
namespace {

// Works on [N, C, H, W] floats in [0, 255]; converts back to the caller's layout and dtype.
struct Canvas {
  explicit Canvas(const at::Tensor& image) : batched(image.dim() == 4), dtype(image.scalar_type()) {
    if (image.dim() != 3 && image.dim() != 4) {
      throw std::invalid_argument("image operations need [C, H, W] or [N, C, H, W] images, got shape " +
                                  c10::str(image.sizes()));
    }
    x = (batched ? image : image.unsqueeze(0)).to(at::kFloat);
    if (at::isFloatingType(dtype)) x = x * 255.0;
  }
  at::Tensor finish(at::Tensor y) const {
    y = y.clamp(0, 255);
    y = at::isFloatingType(dtype) ? (y / 255.0).to(dtype) : y.round().to(dtype);
    return batched ? y : y.squeeze(0);
  }
  bool batched;
  at::ScalarType dtype;
  at::Tensor x;
};

at::Tensor blend(const at::Tensor& degenerate, const at::Tensor& x, double factor) {
  return degenerate + (x - degenerate) * factor;
}

// ITU-R 601-2 luma, as PIL's convert("L").
at::Tensor grayscale(const at::Tensor& x) {
  if (x.size(1) != 3) return x.mean(1, true);
  return (x.select(1, 0) * 0.299 + x.select(1, 1) * 0.587 + x.select(1, 2) * 0.114).unsqueeze(1);
}

double level_int(double level, double maxval) { return std::floor(level * maxval / 10.0); }
double level_float(double level, double maxval) { return level * maxval / 10.0; }

}  // namespace

at::Tensor autocontrast(const at::Tensor& image) {
  Canvas c(image);
  const at::Tensor x = c.x.round();
  const at::Tensor lo = x.amin({2, 3}, true), hi = x.amax({2, 3}, true);
  const at::Tensor range = hi - lo;
  const at::Tensor stretched = (x - lo) * (255.0 / range.clamp_min(1));
  return c.finish(at::where(range > 0, stretched, x));
}

at::Tensor equalize(const at::Tensor& image) {
  Canvas c(image);
  at::Tensor x = c.x.round().clamp(0, 255).to(at::kLong);
  at::Tensor out = at::empty_like(x);
  for (int64_t n = 0; n < x.size(0); ++n) {
    for (int64_t ch = 0; ch < x.size(1); ++ch) {
      const at::Tensor plane = x[n][ch];
      const at::Tensor hist = at::bincount(plane.flatten(), {}, 256);
      const at::Tensor nonzero = hist.nonzero();
      at::Tensor lut = at::arange(256, hist.options());
      if (nonzero.size(0) > 1) {
        const int64_t last = hist[nonzero[-1][0]].item<int64_t>();
        const int64_t step = (hist.sum().item<int64_t>() - last) / 256;
        if (step > 0) lut = ((hist.cumsum(0) - hist + step / 2).div(step, "floor")).clamp_max(255);
      }
      out[n][ch] = lut.index_select(0, plane.flatten()).view_as(plane);
    }
  }
  return c.finish(out.to(at::kFloat));
}

at::Tensor posterize(const at::Tensor& image, int64_t bits) {
  if (bits < 0 || bits > 8)
    throw std::invalid_argument("posterize: bits must be in [0, 8], got " + std::to_string(bits));
  Canvas c(image);
  const int64_t mask = ~((int64_t{1} << (8 - bits)) - 1) & 0xff;
  return c.finish(c.x.round().clamp(0, 255).to(at::kLong).bitwise_and(mask).to(at::kFloat));
}

at::Tensor solarize(const at::Tensor& image, int64_t threshold) {
  Canvas c(image);
  const at::Tensor x = c.x.round();
  return c.finish(at::where(x >= static_cast<double>(threshold), 255.0 - x, x));
}

at::Tensor affine(const at::Tensor& image, const std::array<double, 6>& m) {
  Canvas c(image);
  const int64_t n = c.x.size(0), h = c.x.size(2), w = c.x.size(3);
  const auto opts = c.x.options();
  const at::Tensor xs = at::arange(w, opts) + 0.5, ys = at::arange(h, opts) + 0.5;
  const auto mesh = at::meshgrid({ys, xs}, "ij");
  const at::Tensor u = mesh[1] * m[0] + mesh[0] * m[1] + m[2];
  const at::Tensor v = mesh[1] * m[3] + mesh[0] * m[4] + m[5];
  const at::Tensor grid =
      at::stack({u * (2.0 / static_cast<double>(w)) - 1.0, v * (2.0 / static_cast<double>(h)) - 1.0}, -1)
          .unsqueeze(0)
          .expand({n, h, w, 2});
  // interpolation 0 = bilinear, padding 0 = zeros
  return c.finish(at::grid_sampler(c.x, grid, 0, 0, /*align_corners=*/false));
}

at::Tensor rotate(const at::Tensor& image, double degrees) {
  const double h = static_cast<double>(image.size(-2)), w = static_cast<double>(image.size(-1));
  const double a = -degrees * M_PI / 180.0;
  const double cs = std::cos(a), sn = std::sin(a);
  // PIL: inverse rotation about the centre (w/2, h/2).
  const double cx = w / 2.0, cy = h / 2.0;
  return affine(image, {cs, sn, cs * -cx + sn * -cy + cx, -sn, cs, -sn * -cx + cs * -cy + cy});
}

at::Tensor shear_x(const at::Tensor& image, double f) { return affine(image, {1, f, 0, 0, 1, 0}); }
at::Tensor shear_y(const at::Tensor& image, double f) { return affine(image, {1, 0, 0, f, 1, 0}); }
at::Tensor translate_x(const at::Tensor& image, double p) { return affine(image, {1, 0, p, 0, 1, 0}); }
at::Tensor translate_y(const at::Tensor& image, double p) { return affine(image, {1, 0, 0, 0, 1, p}); }

at::Tensor color(const at::Tensor& image, double factor) {
  Canvas c(image);
  return c.finish(blend(grayscale(c.x).expand_as(c.x), c.x, factor));
}

at::Tensor contrast(const at::Tensor& image, double factor) {
  Canvas c(image);
  const at::Tensor mean = (grayscale(c.x).mean({1, 2, 3}, true) + 0.5).floor();
  return c.finish(blend(mean.expand_as(c.x), c.x, factor));
}

at::Tensor brightness(const at::Tensor& image, double factor) {
  Canvas c(image);
  return c.finish(c.x * factor);
}

at::Tensor sharpness(const at::Tensor& image, double factor) {
  Canvas c(image);
  const int64_t ch = c.x.size(1), h = c.x.size(2), w = c.x.size(3);
  at::Tensor degenerate = c.x.clone();
  if (h > 2 && w > 2) {
    const at::Tensor k =
        (torch::tensor({1.f, 1.f, 1.f, 1.f, 5.f, 1.f, 1.f, 1.f, 1.f}, c.x.options()) / 13.0).view({1, 1, 3, 3});
    const at::Tensor smooth = at::conv2d(c.x, k.expand({ch, 1, 3, 3}), {}, at::IntArrayRef{1, 1}, at::IntArrayRef{0, 0},
                                         at::IntArrayRef{1, 1}, ch)
                                  .round();
    degenerate.narrow(2, 1, h - 2).narrow(3, 1, w - 2).copy_(smooth);
  }
  return c.finish(blend(degenerate, c.x, factor));
}

std::string to_string(Augmentation op) {
  static const char* names[] = {"autocontrast", "equalize",   "posterize",   "rotate",      "solarize",
                                "shear_x",      "shear_y",    "translate_x", "translate_y", "color",
                                "contrast",     "brightness", "sharpness"};
  return names[static_cast<int>(op)];
}

std::vector<Augmentation> augmentation_set(const std::string& name) {
  std::vector<Augmentation> all;
  for (int i = 0; i <= static_cast<int>(Augmentation::SHARPNESS); ++i) all.push_back(static_cast<Augmentation>(i));
  if (name == "all") return all;
  if (name == "safe") return {all.begin(), all.begin() + 9};
  throw std::invalid_argument("augmentation_set must be 'all' or 'safe', got '" + name + "'");
}

at::Tensor augment(const at::Tensor& image, Augmentation op, double severity, at::Generator& gen) {
  algorithms::detail::require_range("augment", "severity", severity, 0.0, 10.0);
  const double level = algorithms::detail::uniform(0.1, std::max(severity, 0.1), gen);
  const auto sign = [&](double v) { return algorithms::detail::uniform(0.0, 1.0, gen) > 0.5 ? -v : v; };
  const double enhance = level_float(level, 1.8) + 0.1;
  switch (op) {
    case Augmentation::AUTO_CONTRAST:
      return autocontrast(image);
    case Augmentation::EQUALIZE:
      return equalize(image);
    case Augmentation::POSTERIZE:
      return posterize(image, 4 - static_cast<int64_t>(level_int(level, 4)));
    case Augmentation::ROTATE:
      return rotate(image, sign(level_int(level, 30)));
    case Augmentation::SOLARIZE:
      return solarize(image, 256 - static_cast<int64_t>(level_int(level, 256)));
    case Augmentation::SHEAR_X:
      return shear_x(image, sign(level_float(level, 0.3)));
    case Augmentation::SHEAR_Y:
      return shear_y(image, sign(level_float(level, 0.3)));
    case Augmentation::TRANSLATE_X:
      return translate_x(image, sign(level_int(level, static_cast<double>(image.size(-1)) / 3.0)));
    case Augmentation::TRANSLATE_Y:
      return translate_y(image, sign(level_int(level, static_cast<double>(image.size(-2)) / 3.0)));
    case Augmentation::COLOR:
      return color(image, enhance);
    case Augmentation::CONTRAST:
      return contrast(image, enhance);
    case Augmentation::BRIGHTNESS:
      return brightness(image, enhance);
    case Augmentation::SHARPNESS:
      return sharpness(image, enhance);
  }
  return image;
}

at::Tensor augment_chain(const at::Tensor& image, const std::vector<Augmentation>& ops, int64_t depth, double severity,
                         at::Generator& gen) {
  if (ops.empty()) throw std::invalid_argument("augment_chain: no operations to draw from");
  at::Tensor out = image;
  for (int64_t d = 0; d < depth; ++d) {
    const auto pick = static_cast<size_t>(algorithms::detail::randint(0, static_cast<int64_t>(ops.size()), gen));
    out = augment(out, ops[pick], severity, gen);
  }
  return out;
}

}  // namespace composer::functional
