// GGUF files (llama.cpp's model format, version 2 and 3): a little-endian header, typed key-value metadata, tensor
// descriptions, then the tensor data at an aligned offset, each tensor F32, F16, BF16 or a block-quantized type.
// The reader maps the file and knows only bytes: what the metadata means for a model is models/'s business.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

namespace composer::formats {

/// ggml's tensor types, with their numbers in the file.
enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  BF16 = 30,
};

/// "Q4_K", ..., or "type N" for a number ggml does not have.
std::string ggml_type_name(uint32_t type);

/// One metadata value: integers of every width as int64 (uint64 above INT64_MAX is an error), floats as double,
/// arrays by element kind.
using GgufValue = std::variant<int64_t, double, bool, std::string, std::vector<int64_t>, std::vector<double>,
                               std::vector<std::string>>;

struct GgufTensorInfo {
  std::string name;
  /// Torch order (outermost first): GGUF's ne[] reversed, so a [rows, cols] weight has ne = {cols, rows}.
  std::vector<int64_t> shape;
  uint32_t type = 0;
  /// Byte offset from the start of the file and size of the data.
  uint64_t offset = 0, nbytes = 0;
};

/// A GGUF file, mapped read-only. Every error names the file (and the key or tensor).
class GgufFile {
 public:
  /// Reads the header, metadata and tensor table. Throws std::runtime_error naming the file when it is not GGUF, has
  /// another version, is truncated, or a tensor's data lies outside the file or has a type this reader cannot
  /// dequantize (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K are read).
  explicit GgufFile(const std::string& path);
  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  const std::map<std::string, GgufValue>& metadata() const { return metadata_; }
  bool has(const std::string& key) const { return metadata_.count(key) > 0; }
  /// Typed reads; each throws std::runtime_error naming the file and key when it is missing or of another kind.
  int64_t get_int(const std::string& key) const;
  double get_float(const std::string& key) const;  ///< also takes an integer
  bool get_bool(const std::string& key) const;
  std::string get_string(const std::string& key) const;
  std::vector<int64_t> get_ints(const std::string& key) const;
  std::vector<double> get_floats(const std::string& key) const;
  std::vector<std::string> get_strings(const std::string& key) const;

  /// Tensors in file order.
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  bool has_tensor(const std::string& name) const { return index_.count(name) > 0; }
  /// The tensor's description; throws std::runtime_error naming the file and the tensor when it is absent.
  const GgufTensorInfo& info(const std::string& name) const;
  /// The tensor dequantized into a new CPU tensor of `dtype` (a floating type) in its torch shape.
  at::Tensor tensor(const std::string& name, at::ScalarType dtype = at::kFloat) const;
  /// Elements [offset, offset + numel) of the tensor's row-major flattening, dequantized into a new 1-D float tensor:
  /// only the blocks that hold them are read (a sharded load reads its part). Throws std::invalid_argument naming the
  /// tensor when the range lies outside it.
  at::Tensor read_part(const std::string& name, int64_t offset, int64_t numel) const;

 private:
  void parse();
  std::string path_;
  const unsigned char* data_ = nullptr;
  size_t size_ = 0;
  uint32_t version_ = 0;
  std::map<std::string, GgufValue> metadata_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t> index_;
};

/// Dequantizes `count` values of ggml type `type` from `src` (count a multiple of the type's block size) into `dst`.
/// Throws std::invalid_argument naming a type it cannot read.
void dequantize(uint32_t type, const unsigned char* src, float* dst, int64_t count);
/// Bytes that `count` values of `type` take; throws std::invalid_argument for an unknown type or a count that is not
/// a multiple of the block size (naming both).
uint64_t ggml_nbytes(uint32_t type, int64_t count);
/// Values per block (1 for F32, F16, BF16).
int64_t ggml_block_size(uint32_t type);

}  // namespace composer::formats
