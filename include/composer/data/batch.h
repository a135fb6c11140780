// Batch: the unit of data every loop, algorithm and callback reads and changes.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace composer {

/// Addresses one field of a Batch: a position (Composer's input_key=0, target_key=1) or a name ("input_ids").
using BatchKey = std::variant<int64_t, std::string>;

/// An ordered list of named tensors sharing dimension 0 (the sample dimension).
/// Vision batches are {"input", "target"} (positions 0 and 1); language batches use "input_ids",
/// "attention_mask", "labels". Copying a Batch copies tensor handles, not data.
class Batch {
 public:
  Batch() = default;
  /// A supervised batch: fields "input" (position 0) and "target" (position 1).
  Batch(at::Tensor input, at::Tensor target);
  explicit Batch(std::vector<std::pair<std::string, at::Tensor>> fields);

  size_t size() const { return fields_.size(); }
  bool empty() const { return fields_.empty(); }
  bool has(const std::string& key) const;
  std::vector<std::string> keys() const;

  /// The field at `key`; throws std::out_of_range naming the key and the fields present.
  at::Tensor& at(const BatchKey& key);
  const at::Tensor& at(const BatchKey& key) const;
  at::Tensor& operator[](const BatchKey& key) { return at(key); }
  const at::Tensor& operator[](const BatchKey& key) const { return at(key); }
  /// Replaces a field (by position or name) or appends a new named field.
  void set(const BatchKey& key, at::Tensor value);

  const at::Tensor& input() const { return at(int64_t{0}); }
  const at::Tensor& target() const { return at(int64_t{1}); }

  /// Every field moved to `device` (non_blocking copies from pinned memory on CUDA).
  Batch to(const c10::Device& device, bool non_blocking = false) const;
  /// Composer's default: the common dim-0 size of the tensors (throws if they disagree).
  int64_t num_samples() const;
  /// Composer's default: numel of "input_ids" if present, else 0.
  int64_t num_tokens() const;
  /// Consecutive pieces of at most `microbatch_size` samples (views, no copy). Requires microbatch_size > 0.
  std::vector<Batch> split(int64_t microbatch_size) const;

  const std::vector<std::pair<std::string, at::Tensor>>& fields() const { return fields_; }

 private:
  size_t index_of(const BatchKey& key) const;
  std::vector<std::pair<std::string, at::Tensor>> fields_;
};

}  // namespace composer
