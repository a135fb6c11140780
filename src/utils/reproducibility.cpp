#include "composer/utils/reproducibility.h"

#include <torch/cuda.h>
#include <torch/utils.h>

namespace composer {

void seed_all(uint64_t seed) {
  torch::manual_seed(seed);  // the CPU generator, and the CUDA generators when CUDA is there
  if (torch::cuda::is_available()) torch::cuda::manual_seed_all(seed);
}

}  // namespace composer
