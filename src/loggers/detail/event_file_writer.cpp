#include "loggers/detail/event_file_writer.h"

#include "tensorboard.pb.h"

#include <unistd.h>
#include <boost/crc.hpp>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <stdexcept>

namespace composer::detail {

uint32_t crc32c(const void* data, size_t size) {
  boost::crc_optimal<32, 0x1EDC6F41, 0xFFFFFFFF, 0xFFFFFFFF, true, true> crc;
  crc.process_bytes(data, size);
  return crc.checksum();
}

uint32_t masked_crc32c(const void* data, size_t size) {
  const uint32_t c = crc32c(data, size);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string event_file_name() {
  static std::atomic<int> counter{0};
  char host[256] = "localhost";
  gethostname(host, sizeof host - 1);
  return "events.out.tfevents." + std::to_string(static_cast<int64_t>(now_seconds())) + "." + host + "." +
         std::to_string(getpid()) + "." + std::to_string(counter++);
}

void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

}  // namespace

EventFileWriter::EventFileWriter(const std::string& log_dir) {
  std::error_code ec;
  std::filesystem::create_directories(log_dir, ec);
  if (ec) throw std::runtime_error("TensorboardLogger: cannot create log folder '" + log_dir + "': " + ec.message());
  path_ = (std::filesystem::path(log_dir) / event_file_name()).string();
  file_ = std::fopen(path_.c_str(), "wb");
  if (!file_) throw std::runtime_error("TensorboardLogger: cannot open '" + path_ + "' for writing");
  tensorboard::Event version;
  version.set_wall_time(now_seconds());
  version.set_file_version("brain.Event:2");
  write(version);
  flush();
}

EventFileWriter::~EventFileWriter() {
  if (file_) std::fclose(file_);
}

void EventFileWriter::write(const tensorboard::Event& event) {
  std::string bytes;
  if (!event.SerializeToString(&bytes)) throw std::runtime_error("TensorboardLogger: cannot serialize an event");
  write_record(bytes);
}

void EventFileWriter::write_record(const std::string& bytes) {
  std::string record;
  record.reserve(bytes.size() + 16);
  put_le(record, bytes.size(), 8);
  put_le(record, masked_crc32c(record.data(), 8), 4);
  record += bytes;
  put_le(record, masked_crc32c(bytes.data(), bytes.size()), 4);
  if (std::fwrite(record.data(), 1, record.size(), file_) != record.size())
    throw std::runtime_error("TensorboardLogger: write to '" + path_ + "' failed (disk full?)");
}

void EventFileWriter::flush() {
  if (std::fflush(file_) != 0) throw std::runtime_error("TensorboardLogger: flush of '" + path_ + "' failed");
}

}  // namespace composer::detail
