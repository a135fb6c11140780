// The c10d class the collectives are called on: c10d::ProcessGroup in LibTorch 1.13, c10d::Backend in 2.x
// (ProcessGroupGloo / ProcessGroupNCCL derive from it in each version, with the same collective signatures).
#pragma once

#include "composer/utils/compat.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#if COMPOSER_TORCH_AT_LEAST(2, 0)
#include <torch/csrc/distributed/c10d/Backend.hpp>
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#endif

namespace composer::dist::detail {

#if COMPOSER_TORCH_AT_LEAST(2, 0)
using CommBackend = c10d::Backend;
#else
using CommBackend = c10d::ProcessGroup;
#endif

}  // namespace composer::dist::detail
