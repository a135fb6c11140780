#include "algorithms/detail/common.h"

#include "utils/detail/text.h"

#include <torch/torch.h>

#include <cmath>

namespace composer::algorithms::detail {
namespace {

at::Tensor gamma(double shape, int64_t n, const std::optional<at::Generator>& gen) {
  const at::Tensor alpha = at::full({n}, shape, at::kDouble);
  return gen ? at::_standard_gamma(alpha, *gen) : at::_standard_gamma(alpha);
}

int64_t clip(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : (v > hi ? hi : v); }
int64_t floor_div2(int64_t v) { return v >= 0 ? v / 2 : -((-v + 1) / 2); }  // Python's v // 2

}  // namespace

std::array<int64_t, 4> random_box(int64_t h, int64_t w, int64_t cut_h, int64_t cut_w, bool uniform_sampling) {
  int64_t cy = 0, cx = 0;
  if (uniform_sampling) {
    cy = randint(floor_div2(-cut_h), h + cut_h / 2);
    cx = randint(floor_div2(-cut_w), w + cut_w / 2);
  } else {
    cy = randint(0, h);
    cx = randint(0, w);
  }
  return {clip(cy - cut_h / 2, 0, h), clip(cx - cut_w / 2, 0, w), clip(cy + cut_h / 2, 0, h),
          clip(cx + cut_w / 2, 0, w)};
}

double sample_beta(double a, double b, std::optional<at::Generator> gen) {
  const double x = gamma(a, 1, gen).item<double>();
  const double y = gamma(b, 1, gen).item<double>();
  return x + y > 0 ? x / (x + y) : 0.5;
}

std::vector<double> sample_dirichlet(double alpha, int64_t n, std::optional<at::Generator> gen) {
  const at::Tensor g = gamma(alpha, n, gen);
  const double total = g.sum().item<double>();
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[i] = total > 0 ? g[i].item<double>() / total : 1.0 / static_cast<double>(n);
  return out;
}

int64_t randint(int64_t lo, int64_t hi, std::optional<at::Generator> gen) {
  if (hi <= lo)
    throw std::invalid_argument("randint: empty range [" + std::to_string(lo) + ", " + std::to_string(hi) + ")");
  const at::Tensor r = gen ? at::randint(lo, hi, {1}, *gen, at::kLong) : at::randint(lo, hi, {1}, at::kLong);
  return r.item<int64_t>();
}

double uniform(double lo, double hi, std::optional<at::Generator> gen) {
  const at::Tensor r = gen ? at::rand({1}, *gen, at::kDouble) : at::rand({1}, at::kDouble);
  return lo + (hi - lo) * r.item<double>();
}

at::Tensor randperm(int64_t n, const c10::Device& device) {
  return at::randperm(n, at::TensorOptions().dtype(at::kLong)).to(device);
}

void bad_option(const std::string& what, const std::string& field, const std::string& expected, double value) {
  throw std::invalid_argument(what + "." + field + " must be " + expected + ", got " +
                              composer::detail::python_float_str(value));
}

void require_range(const std::string& what, const std::string& field, double value, double lo, double hi, bool lo_open,
                   bool hi_open) {
  const bool ok = (lo_open ? value > lo : value >= lo) && (hi_open ? value < hi : value <= hi) && !std::isnan(value);
  if (!ok) {
    const std::string hi_s = std::isinf(hi) ? "inf" : composer::detail::python_float_str(hi);
    bad_option(what, field,
               std::string("in ") + (lo_open ? "(" : "[") + composer::detail::python_float_str(lo) + ", " + hi_s +
                   (hi_open ? ")" : "]"),
               value);
  }
}

at::Tensor& batch_field(Batch& batch, const BatchKey& key, const std::string& algorithm) {
  try {
    return batch.at(key);
  } catch (const std::out_of_range& e) {
    throw std::out_of_range(algorithm + ": " + e.what());
  }
}

std::string key_string(const BatchKey& key) {
  return std::holds_alternative<int64_t>(key) ? std::to_string(std::get<int64_t>(key)) : std::get<std::string>(key);
}

}  // namespace composer::algorithms::detail
