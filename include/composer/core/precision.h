// Precision: Composer's numerics modes.
#pragma once

#include <string>

namespace composer {

/// fp32 runs without autocast; amp_bf16 autocasts to bfloat16 (CPU and CUDA); amp_fp16 autocasts to float16 with a
/// GradScaler (CUDA only).
enum class Precision { FP32, AMP_FP16, AMP_BF16 };

/// "fp32", "amp_fp16", "amp_bf16".
const char* to_string(Precision p);
/// Parses Composer's names; throws std::invalid_argument naming the input and the choices.
Precision parse_precision(const std::string& text);

}  // namespace composer
