// Whether bfloat16 autocast can pay off on this CPU. Whether LibTorch's bfloat16 kernels beat its float32 ones on a
// CPU depends on the CPU, oneDNN and the shapes, not on the flags the CPU reports: the project recorded bf16 autocast
// convolutions at about 23x the fp32 time on its 2-core AMD EPYC host, and on 2026-12-06 the same kind of host ran a
// bf16 convolution's forward and backward in 0.4-0.5x the fp32 time. So the Trainer measures at start-up instead of
// guessing, and says so before a run that asked for amp_bf16 on the CPU silently takes many times longer.
#pragma once

#include <optional>
#include <string>

namespace composer::detail {

/// bfloat16 time over float32 time for the forward and backward of one 3x3 convolution and one matrix product of
/// typical training sizes (the best of 3 runs each, after a warm-up): well under a second in all.
struct Bf16Speed {
  double conv_ratio = 1.0;
  double matmul_ratio = 1.0;
};
Bf16Speed measure_cpu_bf16_speed();

/// The warning to print when either ratio is above 1.5 (bfloat16 cannot win there), naming both; nullopt otherwise.
std::optional<std::string> bf16_warning(const Bf16Speed& speed);

}  // namespace composer::detail
