// torch.save's zip format, streamed to and from files (LibTorch's pickle_save/pickle_load go through one in-memory
// buffer of the whole file, which cost 8.5 s for 1.5 GB on the 2-core machine: bench/results/checkpoint_io.md).
// Uses torch::jit's Pickler, writeArchiveAndTensors and readArchiveAndTensors (the same signatures across 2.x).
#pragma once

#include "composer/utils/atomic_file.h"

#include <ATen/core/ivalue.h>

#include <string>

namespace composer::detail {

/// Writes `value` in torch.save's format (readable by Python's torch.load) through `sink`.
void pickle_to(const c10::IValue& value, const ByteSink& sink);
/// Reads a file in torch.save's format: LibTorch's unpickler, or for files Python wrote with objects it refuses,
/// unpickle_python_archive (python_pickle.h).
c10::IValue unpickle_file(const std::string& path);
/// The same for a torch.save archive in memory (a sharded checkpoint's blobs).
c10::IValue unpickle_bytes(const std::string& bytes);

}  // namespace composer::detail
