#include "composer/trainer/precision_context.h"

#include "composer/core/autocast.h"

#include <stdexcept>

namespace composer {

PrecisionContext::PrecisionContext(Precision precision, c10::Device device) : precision_(precision), device_(device) {
  if (precision == Precision::AMP_FP16 && !device.is_cuda()) {
    throw std::invalid_argument("precision 'amp_fp16' needs a CUDA device (got device '" + device.str() +
                                "'); use 'amp_bf16' or 'fp32' on the CPU");
  }
}

std::unique_ptr<compat::AutocastGuard> PrecisionContext::enter() const { return enter_autocast(precision_, device_); }

}  // namespace composer
