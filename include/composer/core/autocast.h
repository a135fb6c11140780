// The autocast region a Precision asks for: the one mapping from Composer's numerics modes to autocast dtypes, shared
// by the loop units (PrecisionContext) and the algorithms that run a forward of their own (SelectiveBackprop).
#pragma once

#include "composer/core/precision.h"
#include "composer/utils/compat.h"

#include <memory>

namespace composer {

/// The dtype a Precision computes in: float32 for fp32, bfloat16 for amp_bf16, float16 for amp_fp16 (what FSDP's
/// DEFAULT mixed precision gathers the weights in).
at::ScalarType compute_dtype(Precision precision);

/// An active autocast guard on `device` for amp_bf16 (bfloat16) and amp_fp16 (float16); nullptr for fp32. Keep it
/// alive for the region.
std::unique_ptr<compat::AutocastGuard> enter_autocast(Precision precision, const c10::Device& device);

}  // namespace composer
