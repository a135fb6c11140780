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
/// redone after an out-of-memory error draws the same dropout masks and augmentations as its first attempt, and a
/// checkpoint carries them as Composer's `rng` entry.
struct GeneratorStates {
  at::Tensor cpu;                ///< the CPU generator's state (uint8)
  std::vector<at::Tensor> cuda;  ///< one per CUDA device, in device order

  static GeneratorStates capture();
  /// Sets the CPU generator and the first min(cuda.size(), device count) CUDA generators.
  void restore() const;
};

}  // namespace composer
