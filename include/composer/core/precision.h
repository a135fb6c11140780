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

class Hparams;
/// As a field (core/fields.h): 'amp_bf16'; read with parse_precision, errors naming the key.
std::string field_text(Precision p);
void read_field(Hparams& h, const std::string& key, Precision& p);

}  // namespace composer
