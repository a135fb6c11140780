#include "composer/core/precision.h"

#include "composer/core/autocast.h"
#include "composer/core/hparams.h"

#include <stdexcept>

namespace composer {

at::ScalarType compute_dtype(Precision precision) {
  switch (precision) {
    case Precision::FP32:
      return at::kFloat;
    case Precision::AMP_BF16:
      return at::kBFloat16;
    case Precision::AMP_FP16:
      return at::kHalf;
  }
  return at::kFloat;
}

std::unique_ptr<compat::AutocastGuard> enter_autocast(Precision precision, const c10::Device& device) {
  if (precision == Precision::FP32) return nullptr;
  return std::make_unique<compat::AutocastGuard>(device.type(), compute_dtype(precision));
}

const char* to_string(Precision p) {
  switch (p) {
    case Precision::FP32:
      return "fp32";
    case Precision::AMP_FP16:
      return "amp_fp16";
    case Precision::AMP_BF16:
      return "amp_bf16";
  }
  return "unknown";
}

Precision parse_precision(const std::string& text) {
  if (text == "fp32") return Precision::FP32;
  if (text == "amp_fp16") return Precision::AMP_FP16;
  if (text == "amp_bf16") return Precision::AMP_BF16;
  if (text == "amp_fp8")
    throw std::invalid_argument("precision 'amp_fp8' needs TransformerEngine, which Composer C++ does not support");
  throw std::invalid_argument("Invalid precision '" + text + "': expected one of fp32, amp_fp16, amp_bf16");
}

std::string field_text(Precision p) { return std::string("'") + to_string(p) + "'"; }

void read_field(Hparams& h, const std::string& key, Precision& p) {
  if (!h.has(key)) return;
  try {
    p = parse_precision(h.get_string(key, ""));
  } catch (const std::invalid_argument& e) {
    h.error(key, e.what());
  }
}

}  // namespace composer
