// EventFileWriter: appends TensorBoard Events to one event file in TFRecord framing.
// Each record is: uint64 length, uint32 masked CRC-32C of the length, the serialized Event, uint32 masked CRC-32C of
// it (little-endian), which is what TensorBoard's reader checks. Records are appended and flushed whole, so a run
// killed mid-write leaves at most one truncated last record, which the reader skips.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace composer::tensorboard {
class Event;
}

namespace composer::detail {

/// CRC-32C (Castagnoli) of bytes, and TFRecord's mask of it.
uint32_t crc32c(const void* data, size_t size);
uint32_t masked_crc32c(const void* data, size_t size);

class EventFileWriter {
 public:
  /// Creates log_dir (and parents) and a new file "events.out.tfevents.<seconds>.<host>.<pid>.<n>" in it that starts
  /// with the file_version record. Throws std::runtime_error naming the path when it cannot.
  explicit EventFileWriter(const std::string& log_dir);
  ~EventFileWriter();
  EventFileWriter(const EventFileWriter&) = delete;
  EventFileWriter& operator=(const EventFileWriter&) = delete;

  /// Appends one Event (throws std::runtime_error naming the file on a failed write, such as a full disk).
  void write(const tensorboard::Event& event);
  void flush();
  const std::string& path() const { return path_; }

 private:
  void write_record(const std::string& bytes);
  std::string path_;
  std::FILE* file_ = nullptr;
};

}  // namespace composer::detail
