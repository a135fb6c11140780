#include "formats/detail/zip_verify.h"

#include <zlib.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <vector>

namespace composer::detail {
namespace {

constexpr uint32_t kEndOfDirectory = 0x06054b50, kZip64End = 0x06064b50, kZip64Locator = 0x07064b50;
constexpr uint32_t kDirectoryEntry = 0x02014b50, kLocalHeader = 0x04034b50;

uint64_t le(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

class File {
 public:
  explicit File(const std::string& path) : fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
    struct stat st {};
    if (fd_ < 0 || ::fstat(fd_, &st) != 0)
      throw std::runtime_error(std::string("cannot be read: ") + std::strerror(errno));
    size_ = static_cast<uint64_t>(st.st_size);
  }
  ~File() {
    if (fd_ >= 0) ::close(fd_);
  }
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  uint64_t size() const { return size_; }
  std::vector<uint8_t> read(uint64_t offset, uint64_t n, const char* what) const {
    if (offset > size_ || n > size_ - offset)
      throw std::runtime_error(std::string(what) + " lies past the end of the file (truncated)");
    std::vector<uint8_t> buf(n);
    read_into(offset, buf.data(), n);
    return buf;
  }
  void read_into(uint64_t offset, uint8_t* dst, uint64_t n) const {
    while (n > 0) {
      const ssize_t got = ::pread(fd_, dst, n, static_cast<off_t>(offset));
      if (got <= 0)
        throw std::runtime_error(std::string("cannot be read: ") + (got < 0 ? std::strerror(errno) : "unexpected end"));
      dst += got;
      offset += static_cast<uint64_t>(got);
      n -= static_cast<uint64_t>(got);
    }
  }

 private:
  int fd_;
  uint64_t size_ = 0;
};

struct Directory {
  uint64_t entries = 0, offset = 0, size = 0;
};

Directory find_directory(const File& f) {
  const uint64_t tail = std::min<uint64_t>(f.size(), 22 + 65535);
  const std::vector<uint8_t> end = f.read(f.size() - tail, tail, "the zip directory");
  for (int64_t i = static_cast<int64_t>(tail) - 22; i >= 0; --i) {
    const uint8_t* p = end.data() + i;
    if (le(p, 4) != kEndOfDirectory) continue;
    Directory d{le(p + 10, 2), le(p + 16, 4), le(p + 12, 4)};
    const uint64_t eocd = f.size() - tail + static_cast<uint64_t>(i);
    if ((d.entries == 0xFFFF || d.offset == 0xFFFFFFFF || d.size == 0xFFFFFFFF) && eocd >= 20) {
      const std::vector<uint8_t> loc = f.read(eocd - 20, 20, "the zip64 locator");
      if (le(loc.data(), 4) == kZip64Locator) {
        const std::vector<uint8_t> z = f.read(le(loc.data() + 8, 8), 56, "the zip64 directory end");
        if (le(z.data(), 4) != kZip64End) throw std::runtime_error("its zip64 directory record is damaged");
        d = Directory{le(z.data() + 32, 8), le(z.data() + 48, 8), le(z.data() + 40, 8)};
      }
    }
    return d;
  }
  throw std::runtime_error("is not a zip archive (no end-of-directory record)");
}

uint32_t crc_of_range(const File& f, uint64_t offset, uint64_t n) {
  constexpr uint64_t kChunk = 4 << 20;
  std::vector<uint8_t> buf(std::min(n, kChunk));
  uLong crc = crc32_z(0L, Z_NULL, 0);
  while (n > 0) {
    const uint64_t m = std::min(n, kChunk);
    f.read_into(offset, buf.data(), m);
    crc = crc32_z(crc, buf.data(), m);
    offset += m;
    n -= m;
  }
  return static_cast<uint32_t>(crc);
}

struct Record {
  std::string name;
  uint64_t data = 0, size = 0;
  uint32_t crc = 0;
};

// Checks the records' CRC-32s on up to hardware_concurrency threads (zlib's crc32 runs near 2 GB/s a core).
void check_crcs(const File& f, const std::vector<Record>& records) {
  uint64_t total = 0;
  for (const auto& r : records) total += r.size;
  const unsigned threads =
      static_cast<unsigned>(std::clamp<uint64_t>(total >> 26, 1, std::max(1u, std::thread::hardware_concurrency())));
  std::atomic<size_t> next{0};
  std::vector<std::string> errors(threads);
  auto work = [&](unsigned t) {
    try {
      for (size_t i = next++; i < records.size(); i = next++) {
        const Record& r = records[i];
        if (crc_of_range(f, r.data, r.size) != r.crc) {
          throw std::runtime_error("record '" + r.name + "' (" + std::to_string(r.size) +
                                   " bytes) fails its CRC-32 check: the bytes were damaged");
        }
      }
    } catch (const std::exception& e) {
      errors[t] = e.what();
      next = records.size();
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(work, t);
  work(0);
  for (auto& th : pool) th.join();
  for (const auto& e : errors)
    if (!e.empty()) throw std::runtime_error(e);
}

}  // namespace

int64_t verify_zip_records(const std::string& path) {
  const File f(path);
  const Directory d = find_directory(f);
  const std::vector<uint8_t> dir = f.read(d.offset, d.size, "the zip directory");
  uint64_t pos = 0;
  std::vector<Record> records;
  for (uint64_t e = 0; e < d.entries; ++e) {
    if (pos + 46 > dir.size() || le(dir.data() + pos, 4) != kDirectoryEntry)
      throw std::runtime_error("its zip directory is damaged");
    const uint8_t* p = dir.data() + pos;
    const uint64_t method = le(p + 10, 2), name_len = le(p + 28, 2), extra_len = le(p + 30, 2),
                   comment_len = le(p + 32, 2);
    const uint32_t crc = static_cast<uint32_t>(le(p + 16, 4));
    uint64_t compressed = le(p + 20, 4), size = le(p + 24, 4), local = le(p + 42, 4);
    if (pos + 46 + name_len + extra_len + comment_len > dir.size())
      throw std::runtime_error("its zip directory is damaged");
    const std::string name(reinterpret_cast<const char*>(p + 46), name_len);
    // The zip64 extra field holds the 64-bit values whose 32-bit fields are all ones, in this order.
    for (uint64_t x = 0; x + 4 <= extra_len;) {
      const uint8_t* q = p + 46 + name_len + x;
      const uint64_t id = le(q, 2), len = le(q + 2, 2);
      if (id == 0x0001) {
        uint64_t at = 4;
        for (uint64_t* field : {&size, &compressed, &local}) {
          if (*field != 0xFFFFFFFF || at + 8 > 4 + len) continue;
          *field = le(q + at, 8);
          at += 8;
        }
      }
      x += 4 + len;
    }
    pos += 46 + name_len + extra_len + comment_len;
    if (method != 0) continue;  // torch.save stores every record uncompressed; others are not ours to check
    const std::vector<uint8_t> header = f.read(local, 30, ("record '" + name + "'").c_str());
    if (le(header.data(), 4) != kLocalHeader) throw std::runtime_error("record '" + name + "' has a damaged header");
    const uint64_t data = local + 30 + le(header.data() + 26, 2) + le(header.data() + 28, 2);
    if (data > f.size() || size > f.size() - data) throw std::runtime_error("record '" + name + "' is truncated");
    records.push_back({name, data, size, crc});
  }
  check_crcs(f, records);
  return static_cast<int64_t>(records.size());
}

}  // namespace composer::detail
