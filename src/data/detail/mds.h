// MosaicML Streaming's MDS format: the index, a shard's sample table, and the column encodings.
#pragma once

#include <ATen/core/Tensor.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace composer::detail {

struct MdsColumn {
  std::string name, encoding;
  std::optional<int64_t> size;  // fixed size in bytes, when the encoding has one
};

struct MdsFile {
  std::string basename;
  int64_t bytes = 0;
  std::map<std::string, std::string> hashes;
};

struct MdsShard {
  std::vector<MdsColumn> columns;
  std::string compression;  // "" or "zstd" (a ":level" suffix dropped)
  MdsFile raw, zip;         // zip.basename empty without compression
  int64_t samples = 0;
};

/// Parses index.json (version 2, format "mds"); `where` names it in errors (std::invalid_argument).
std::vector<MdsShard> parse_mds_index(const nlohmann::json& index, const std::string& where);

/// A read-only memory map of a file.
class MappedFile {
 public:
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const char* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  const char* data_ = nullptr;
  size_t size_ = 0;
};

/// Checks a raw shard's header against its index entry: the sample count it holds and a table that fits the file.
void check_mds_header(const MappedFile& shard, int64_t samples, const std::string& where);
/// Sample `i` of a raw shard: its bytes (checked against the shard's table).
std::string_view mds_sample(const MappedFile& shard, int64_t i, const std::string& where);
/// The column values of a sample, split by the fixed sizes and the size prefixes.
std::vector<std::string_view> mds_columns(std::string_view sample, const std::vector<MdsColumn>& columns,
                                          const std::string& where);
/// Whether the encoding decodes to a tensor (see StreamingDataset).
bool mds_is_tensor(const std::string& encoding);
/// Why an encoding cannot be read ("" when it can).
std::string mds_unsupported(const std::string& encoding);
/// A tensor column's value: scalars as 0-d tensors, ndarray as its array, pil/jpeg/png as uint8 [C, H, W], an image
/// list (jpeg_array, list[pil|jpeg|png]) as uint8 [N, C, H, W].
at::Tensor mds_decode_tensor(const std::string& encoding, std::string_view value, const std::string& where);

/// Decompresses a zstd file into `to` (written atomically). Throws std::runtime_error naming the file.
void zstd_decompress_file(const std::string& from, const std::string& to);
/// The hex digest of a file under a hash Streaming names (sha1, sha224, sha256, sha384, sha512, md5); "" for a hash
/// this build cannot compute.
std::string file_digest(const std::string& path, const std::string& algorithm);

}  // namespace composer::detail
