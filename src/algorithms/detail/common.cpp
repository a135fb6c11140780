#include "algorithms/detail/common.h"

#include "utils/detail/text.h"

#include <torch/torch.h>

#include <cmath>
#include <iostream>

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

std::map<std::string, at::Tensor> tensor_map(const c10::IValue& value, const std::string& what) {
  if (!value.isGenericDict()) throw std::invalid_argument(what + " must map names to tensors");
  std::map<std::string, at::Tensor> out;
  for (const auto& item : value.toGenericDict()) {
    if (!item.key().isString() || !item.value().isTensor())
      throw std::invalid_argument(what + " must map names to tensors");
    out[item.key().toStringRef()] = item.value().toTensor();
  }
  return out;
}

c10::IValue tensor_dict(const std::map<std::string, at::Tensor>& tensors) {
  Dict d = new_dict();
  for (const auto& [name, t] : tensors) d.insert(name, t);
  return d;
}

bool flag(const Dict& d, const std::string& key, const std::string& what) {
  if (!d.contains(key)) return false;
  const c10::IValue v = d.at(key);
  if (!v.isBool()) throw std::invalid_argument(what + ": " + key + " must be a bool");
  return v.toBool();
}

int64_t integer(const Dict& d, const std::string& key, const std::string& what, int64_t fallback) {
  if (!d.contains(key)) return fallback;
  const c10::IValue v = d.at(key);
  if (!v.isInt()) throw std::invalid_argument(what + ": " + key + " must be an integer");
  return v.toInt();
}

std::vector<Replacement> low_precision_surgery(torch::nn::Module& model, Precision precision,
                                               torch::optim::Optimizer* optimizer, const std::string& method,
                                               const std::string& norm, std::vector<ReplacementPolicy> policies) {
  if (precision != Precision::AMP_FP16 && precision != Precision::AMP_BF16) {
    std::cerr << "composer: " << method << " has no effect at precision " << to_string(precision)
              << " (it applies to amp_fp16 and amp_bf16)\n";
    return {};
  }
  SurgeryOptions options;
  options.optimizer = optimizer;
  auto done = replace_module_classes(model, std::move(policies), options);
  if (done.empty()) std::cerr << "composer: " << method << " found no " << norm << " to replace\n";
  return done;
}

void require_load_event(const std::string& what, Event event) {
  if (event != Event::INIT && event != Event::BEFORE_LOAD && event != Event::AFTER_LOAD) {
    throw std::invalid_argument(what + ".apply_at must be 'init', 'before_load' or 'after_load', got '" +
                                event_value(event) + "'");
  }
}

}  // namespace composer::algorithms::detail
