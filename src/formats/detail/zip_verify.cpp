#include "formats/detail/zip_verify.h"

#include <zlib.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
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

// The archive's bytes the directory parsing reads, checked against its size.
struct File {
  const ByteSource& source;
  uint64_t size;
  std::vector<uint8_t> read(uint64_t offset, uint64_t n, const char* what) const {
    if (offset > size || n > size - offset)
      throw std::runtime_error(std::string(what) + " lies past the end of the file (truncated)");
    std::vector<uint8_t> buf(n);
    source.read(offset, buf.data(), n);
    return buf;
  }
};

struct Directory {
  uint64_t entries = 0, offset = 0, size = 0;
};

Directory find_directory(const File& f) {
  const uint64_t tail = std::min<uint64_t>(f.size, 22 + 65535);
  const std::vector<uint8_t> end = f.read(f.size - tail, tail, "the zip directory");
  for (int64_t i = static_cast<int64_t>(tail) - 22; i >= 0; --i) {
    const uint8_t* p = end.data() + i;
    if (le(p, 4) != kEndOfDirectory) continue;
    Directory d{le(p + 10, 2), le(p + 16, 4), le(p + 12, 4)};
    const uint64_t eocd = f.size - tail + static_cast<uint64_t>(i);
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

uint32_t crc_of_range(const ByteSource& source, uint64_t offset, uint64_t n) {
  constexpr uint64_t kChunk = 4 << 20;
  std::vector<uint8_t> buf(std::min(n, kChunk));
  uLong crc = crc32_z(0L, Z_NULL, 0);
  while (n > 0) {
    const uint64_t m = std::min(n, kChunk);
    source.read(offset, buf.data(), m);
    crc = crc32_z(crc, buf.data(), m);
    offset += m;
    n -= m;
  }
  return static_cast<uint32_t>(crc);
}

// Checks the records' CRC-32s on up to hardware_concurrency threads (zlib's crc32 runs near 2 GB/s a core).
void check_crcs(const ByteSource& source, const std::vector<const ZipRecord*>& records) {
  uint64_t total = 0;
  for (const auto* r : records) total += r->size;
  const unsigned threads = !source.concurrent ? 1u
                                              : static_cast<unsigned>(std::clamp<uint64_t>(
                                                    total >> 26, 1, std::max(1u, std::thread::hardware_concurrency())));
  std::atomic<size_t> next{0};
  std::vector<std::string> errors(threads);
  auto work = [&](unsigned t) {
    try {
      for (size_t i = next++; i < records.size(); i = next++) {
        const ZipRecord& r = *records[i];
        if (crc_of_range(source, r.data, r.size) != r.crc) {
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

// The stored records of the archive in `f`, in directory order.
std::vector<ZipRecord> read_directory(const File& f) {
  const Directory d = find_directory(f);
  const std::vector<uint8_t> dir = f.read(d.offset, d.size, "the zip directory");
  uint64_t pos = 0;
  std::vector<ZipRecord> records;
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
    if (data > f.size || size > f.size - data) throw std::runtime_error("record '" + name + "' is truncated");
    records.push_back({name, data, size, crc});
  }
  return records;
}

}  // namespace

ByteSource file_bytes(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st {};
  if (fd < 0 || ::fstat(fd, &st) != 0) {
    const std::string error = std::strerror(errno);
    if (fd >= 0) ::close(fd);
    throw std::runtime_error("cannot be read: " + error);
  }
  const auto owned = std::shared_ptr<int>(new int(fd), [](int* f) {
    ::close(*f);
    delete f;
  });
  const auto read = [owned](uint64_t offset, void* dst, uint64_t n) {
    auto* to = static_cast<uint8_t*>(dst);
    while (n > 0) {
      const ssize_t got = ::pread(*owned, to, n, static_cast<off_t>(offset));
      if (got <= 0)
        throw std::runtime_error(std::string("cannot be read: ") + (got < 0 ? std::strerror(errno) : "unexpected end"));
      to += got;
      offset += static_cast<uint64_t>(got);
      n -= static_cast<uint64_t>(got);
    }
  };
  return ByteSource{static_cast<uint64_t>(st.st_size), read, true};
}

ZipArchive::ZipArchive(ByteSource source) : source_(std::move(source)) {
  records_ = read_directory(File{source_, source_.size});
}

void ZipArchive::read(const ZipRecord& record, uint64_t offset, void* dst, uint64_t n) const {
  if (offset > record.size || n > record.size - offset) {
    throw std::runtime_error("record '" + record.name + "' (" + std::to_string(record.size) + " bytes) has no bytes [" +
                             std::to_string(offset) + ", " + std::to_string(offset + n) + ")");
  }
  source_.read(record.data + offset, dst, n);
}

int64_t ZipArchive::verify(int64_t share, int64_t shares) const {
  uint64_t total = 0;
  for (const auto& r : records_) total += r.size;
  std::vector<const ZipRecord*> mine;  // record i goes to the share its first byte falls in
  uint64_t before = 0;
  for (const auto& r : records_) {
    const uint64_t owner = total == 0 ? 0 : before * static_cast<uint64_t>(shares) / total;
    if (static_cast<int64_t>(owner) == share) mine.push_back(&r);
    before += r.size;
  }
  check_crcs(source_, mine);
  return static_cast<int64_t>(mine.size());
}

int64_t verify_zip_records(const std::string& path) { return ZipArchive(path).verify(); }

}  // namespace composer::detail
