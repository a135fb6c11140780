// The c10d class the collectives are called on: c10d::Backend, which ProcessGroupGloo and ProcessGroupNCCL derive
// from in every LibTorch 2.x.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

namespace composer::dist::detail {

using CommBackend = c10d::Backend;

}  // namespace composer::dist::detail
