// safetensors files (https://huggingface.co/docs/safetensors): an 8-byte little-endian header length, a JSON header
// {name: {"dtype", "shape", "data_offsets"}, "__metadata__": {...}}, then the raw little-endian tensor bytes.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace composer {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

/// Writes `tensors` (moved to the CPU, made contiguous) crash-safely. Throws std::invalid_argument naming a tensor
/// whose dtype safetensors cannot hold, or a duplicate name.
void write_safetensors(const std::string& path, const NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata = {});
/// Reads a safetensors file back. Throws std::runtime_error naming the file when it is malformed.
NamedTensors read_safetensors(const std::string& path);

}  // namespace composer
