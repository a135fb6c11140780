#include "storage/detail/local_files.h"

#include "composer/storage/object_store.h"
#include "composer/utils/atomic_file.h"

#include <filesystem>
#include <fstream>
#include <random>

namespace composer::detail {

namespace fs = std::filesystem;

void download_through_temporary(const std::string& filename, bool overwrite, const std::string& uri,
                                const std::function<void(const std::string& tmp)>& fetch) {
  if (!overwrite && fs::exists(filename))
    throw ObjectStoreError("downloading " + uri + " failed: '" + filename + "' already exists (overwrite is false)");
  const fs::path parent = fs::path(filename).parent_path();
  std::error_code ec;
  if (!parent.empty()) fs::create_directories(parent, ec);
  if (ec)
    throw ObjectStoreError("downloading " + uri + " failed: cannot create '" + parent.string() + "': " + ec.message());
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  const std::string tmp = filename + "." + std::to_string(rng() % 1000000000) + ".tmp";
  try {
    fetch(tmp);
  } catch (...) {
    fs::remove(tmp, ec);
    throw;
  }
  fs::rename(tmp, filename, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw ObjectStoreError("downloading " + uri + " failed: cannot rename into '" + filename + "'");
  }
}

void copy_file_atomically(const std::string& from, const std::string& to) {
  std::ifstream in(from, std::ios::binary);
  if (!in) throw ObjectStoreError("cannot read '" + from + "'");
  write_file_atomically(to, [&](const ByteSink& sink) {
    std::vector<char> buffer(1 << 20);
    while (in) {
      in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
      if (in.gcount() > 0) sink(buffer.data(), static_cast<size_t>(in.gcount()));
    }
    if (in.bad()) throw ObjectStoreError("cannot read '" + from + "'");
  });
}

std::string read_file_range(const std::string& path, int64_t offset, int64_t length, const std::string& uri) {
  const auto fail = [&](const std::string& why) {
    throw ObjectStoreError("reading bytes [" + std::to_string(offset) + ", " + std::to_string(offset + length) +
                           ") of " + uri + " failed: " + why);
  };
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (ec) fail(ec.message());
  if (offset < 0 || length < 0 || static_cast<uint64_t>(offset + length) > size)
    fail("the object has " + std::to_string(size) + " bytes");
  std::ifstream in(path, std::ios::binary);
  std::string bytes(static_cast<size_t>(length), '\0');
  in.seekg(offset);
  in.read(bytes.data(), length);
  if (in.gcount() != length) fail("the file ended early");
  return bytes;
}

}  // namespace composer::detail
