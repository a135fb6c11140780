// PrecisionContext: the autocast region for forward and loss, per the run's Precision. The loop units hold one; a
// hand-written loop can too.
#pragma once

#include "composer/core/precision.h"
#include "composer/utils/compat.h"

#include <memory>

namespace composer {

class PrecisionContext {
 public:
  /// Throws std::invalid_argument for amp_fp16 on a non-CUDA device.
  PrecisionContext(Precision precision, c10::Device device);
  Precision precision() const { return precision_; }
  /// An active autocast guard for amp_*; nullptr for fp32. Keep it alive for the region.
  std::unique_ptr<compat::AutocastGuard> enter() const;
  bool uses_grad_scaling() const { return precision_ == Precision::AMP_FP16; }

 private:
  Precision precision_;
  c10::Device device_;
};

}  // namespace composer
