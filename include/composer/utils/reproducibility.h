// Seeding, as Composer's reproducibility.seed_all: call it before building the model so that two runs with the same
// seed start from the same weights (the Trainer seeds again, with seed + rank, before training).
#pragma once

#include <cstdint>

namespace composer {

/// Seeds LibTorch's CPU generator and every CUDA device's generator.
void seed_all(uint64_t seed);

}  // namespace composer
