// Seeding, as Composer's reproducibility.seed_all: call it before building the model so that two runs with the same
// seed start from the same weights (the Trainer seeds again, with seed + rank, before training).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace composer {

/// Seeds LibTorch's CPU generator and every CUDA device's generator.
void seed_all(uint64_t seed);

/// The default generators' states (the CPU one and each CUDA device's), taken now and put back by restore(): a batch
/// redone after an out-of-memory error draws the same dropout masks and augmentations as its first attempt.
class GeneratorStates {
 public:
  static GeneratorStates capture();
  void restore() const;

 private:
  at::Tensor cpu_;
  std::vector<at::Tensor> cuda_;
};

}  // namespace composer
