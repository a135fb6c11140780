// IDX files (MNIST, Fashion-MNIST): raw or gzip-compressed.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>

namespace composer {

/// Reads an unsigned-byte IDX file (magic 0x00000801 for 1-D labels, 0x00000803 for 3-D images), plain or gzip.
/// Returns a uint8 tensor of the header's shape. Throws std::runtime_error naming the file on a missing file, a
/// wrong magic number, a truncated body or trailing bytes.
at::Tensor read_idx(const std::string& path);

}  // namespace composer
