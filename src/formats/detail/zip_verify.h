// The records of a torch.save zip archive: where each one's bytes lie, read by ranges, and verified against the CRC-32
// in its central directory. LibTorch's reader (miniz built with MINIZ_DISABLE_ZIP_READER_CRC32_CHECKS) does not
// verify, so a checkpoint whose tensor bytes were damaged would otherwise load silently.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace composer::detail {

/// A stored (uncompressed) record: its name in the archive and where its bytes lie in the file.
struct ZipRecord {
  std::string name;
  uint64_t data = 0, size = 0;
  uint32_t crc = 0;
};

/// Where an archive's bytes come from: `read` fills `dst` with bytes [offset, offset + n) of `size` (a file's pread,
/// or an object store's ranged reads). `concurrent`: read may be called from several threads at once.
struct ByteSource {
  uint64_t size = 0;
  std::function<void(uint64_t offset, void* dst, uint64_t n)> read;
  bool concurrent = false;
};
/// A local file as a ByteSource (pread; concurrent). Throws std::runtime_error when it cannot be opened.
ByteSource file_bytes(const std::string& path);

/// An archive opened for reading its records by byte ranges. Every error is a std::runtime_error naming the record
/// (or the directory); the file's path appears in no message, the caller names the file.
class ZipArchive {
 public:
  explicit ZipArchive(ByteSource source);
  explicit ZipArchive(const std::string& path) : ZipArchive(file_bytes(path)) {}
  const ByteSource& source() const { return source_; }

  /// The stored records in directory order (compressed ones, which torch.save never writes, are left out).
  const std::vector<ZipRecord>& records() const { return records_; }
  /// Reads bytes [offset, offset + n) of `record` into `dst`; throws when the range lies outside the record.
  void read(const ZipRecord& record, uint64_t offset, void* dst, uint64_t n) const;
  /// Checks the CRC-32s of share `share` of `shares` (the records split into `shares` runs of about equal bytes,
  /// so that ranks reading one file each verify their run): the number checked. Throws naming the first damaged one.
  int64_t verify(int64_t share = 0, int64_t shares = 1) const;

 private:
  ByteSource source_;
  std::vector<ZipRecord> records_;
};

/// Number of records checked (all of them). Throws std::runtime_error naming the first damaged or unreadable record
/// (or a malformed directory).
int64_t verify_zip_records(const std::string& path);

}  // namespace composer::detail
