#include "composer/data/idx.h"

#include <ATen/ATen.h>
#include <zlib.h>

#include <filesystem>

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <vector>

namespace composer {
namespace {

struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose(f); }
};

// Reads up to `n` bytes; returns how many were read.
size_t read_bytes(gzFile f, void* dst, size_t n, const std::string& path) {
  size_t done = 0;
  auto* out = static_cast<unsigned char*>(dst);
  while (done < n) {
    const unsigned chunk = static_cast<unsigned>(std::min<size_t>(n - done, 1u << 30));
    const int got = gzread(f, out + done, chunk);
    if (got < 0) {
      int errnum = 0;
      throw std::runtime_error("IDX file '" + path + "': read error (" + gzerror(f, &errnum) + ")");
    }
    if (got == 0) break;
    done += static_cast<size_t>(got);
  }
  return done;
}

uint32_t big_endian(const unsigned char* b) {
  return (uint32_t(b[0]) << 24) | (uint32_t(b[1]) << 16) | (uint32_t(b[2]) << 8) | uint32_t(b[3]);
}

}  // namespace

at::Tensor read_idx(const std::string& path) {
  std::unique_ptr<gzFile_s, GzCloser> f(gzopen(path.c_str(), "rb"));  // also reads uncompressed files
  if (!f) throw std::runtime_error("IDX file '" + path + "' cannot be opened (missing? run tools/fetch_data.sh)");
  unsigned char magic[4];
  if (read_bytes(f.get(), magic, 4, path) != 4)
    throw std::runtime_error("IDX file '" + path + "' is truncated: no header");
  const uint32_t m = big_endian(magic);
  if (m != 0x00000801 && m != 0x00000803) {
    char buf[16];
    std::snprintf(buf, sizeof(buf), "0x%08x", m);
    throw std::runtime_error("IDX file '" + path + "' has magic number " + buf +
                             ", expected 0x00000801 (labels) or 0x00000803 (images) of unsigned bytes");
  }
  const int ndim = static_cast<int>(m & 0xff);
  std::vector<int64_t> shape(ndim);
  // What the file can hold: its size, or for gzip its size times deflate's largest ratio (1032:1). A header that
  // declares more is damaged or not IDX; refuse it before allocating.
  std::error_code ec;
  const auto file_bytes = static_cast<double>(std::filesystem::file_size(path, ec));
  const double capacity = ec ? 0.0 : (gzdirect(f.get()) ? file_bytes : file_bytes * 1032.0);
  double total_d = 1;
  std::string dims;
  for (int i = 0; i < ndim; ++i) {
    unsigned char d[4];
    if (read_bytes(f.get(), d, 4, path) != 4)
      throw std::runtime_error("IDX file '" + path + "' is truncated inside its header");
    shape[i] = big_endian(d);
    total_d *= static_cast<double>(shape[i]);
    dims += (i ? "x" : "") + std::to_string(shape[i]);
  }
  if (!ec && total_d > capacity) {
    throw std::runtime_error("IDX file '" + path + "' declares " + dims + " = " +
                             std::to_string(static_cast<unsigned long long>(std::min(total_d, 1.8e19))) +
                             " bytes of data, more than its " + std::to_string(static_cast<int64_t>(file_bytes)) +
                             "-byte file can hold (a damaged header?)");
  }
  const auto total = static_cast<int64_t>(total_d);
  at::Tensor out = at::empty(shape, at::TensorOptions().dtype(at::kByte));
  const size_t got = read_bytes(f.get(), out.data_ptr(), static_cast<size_t>(total), path);
  if (got != static_cast<size_t>(total)) {
    throw std::runtime_error("IDX file '" + path + "' is truncated: expected " + std::to_string(total) +
                             " data bytes, found " + std::to_string(got));
  }
  unsigned char extra;
  if (read_bytes(f.get(), &extra, 1, path) != 0) {
    throw std::runtime_error("IDX file '" + path + "' has bytes after the " + std::to_string(total) +
                             " its header declares");
  }
  return out;
}

}  // namespace composer
