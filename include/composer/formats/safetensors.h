// safetensors files (https://huggingface.co/docs/safetensors): an 8-byte little-endian header length, a JSON header
// {name: {"dtype", "shape", "data_offsets"}, "__metadata__": {...}}, then the raw little-endian tensor bytes.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
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
/// Reads a safetensors file back, one tensor at a time (SafetensorsFile). Throws std::runtime_error naming the file
/// when it is malformed.
NamedTensors read_safetensors(const std::string& path);

/// A safetensors file read a tensor, or a part of one, at a time: the header is read and checked on opening, a
/// tensor's bytes only when asked for, so that a model loads without the whole file in memory and a rank that holds
/// a shard of a tensor reads only that part's bytes. The file stays open while the object (or a copy) lives: parts
/// are read at their offsets (pread), from any thread.
class SafetensorsFile {
 public:
  /// Throws std::runtime_error naming the file when it cannot be opened or is malformed.
  explicit SafetensorsFile(std::string path);
  const std::string& path() const { return path_; }
  /// The tensors' names, in the header's (sorted) order.
  const std::vector<std::string>& names() const { return names_; }
  bool has(const std::string& name) const { return index_.count(name) > 0; }
  std::vector<int64_t> shape(const std::string& name) const { return entry(name).shape; }
  at::ScalarType dtype(const std::string& name) const { return entry(name).dtype; }
  at::Tensor tensor(const std::string& name) const;
  /// Elements [offset, offset + numel) of the tensor's row-major flattening, as a 1-D tensor: only those bytes read.
  at::Tensor read_part(const std::string& name, int64_t offset, int64_t numel) const;

 private:
  struct Entry {
    at::ScalarType dtype;
    std::vector<int64_t> shape;
    int64_t numel = 0;
    uint64_t begin = 0;  // from the start of the file
  };
  const Entry& entry(const std::string& name) const;
  std::string path_;
  std::function<void(uint64_t offset, void* dst, uint64_t n)> read_;  // the open file's bytes
  std::vector<std::string> names_;
  std::map<std::string, Entry> index_;
};

}  // namespace composer
