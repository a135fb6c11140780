#include "composer/utils/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace composer {
namespace {

std::runtime_error os_error(const std::string& what, const std::string& path, int err) {
  return std::runtime_error(what + " '" + path + "': " + std::strerror(err));
}

std::string temp_name(const std::filesystem::path& target) {
  const auto dir = target.has_parent_path() ? target.parent_path() : std::filesystem::path(".");
  return (dir / ("." + target.filename().string() + ".tmp-" + std::to_string(::getpid()))).string();
}

void fsync_dir(const std::filesystem::path& dir) {
  const int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace

void write_file_atomically(const std::string& path, const std::vector<char>& bytes) {
  write_file_atomically(path, [&](const ByteSink& sink) { sink(bytes.data(), bytes.size()); });
}

void write_file_atomically(const std::string& path, const std::function<void(const ByteSink&)>& produce) {
  const std::filesystem::path target(path);
  if (target.has_parent_path()) std::filesystem::create_directories(target.parent_path());
  const std::string tmp = temp_name(target);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) throw os_error("cannot create", tmp, errno);
  auto fail = [&](const std::string& what, int err) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return os_error(what, path, err);
  };
  const ByteSink sink = [&](const void* data, size_t size) {
    const char* p = static_cast<const char*>(data);
    while (size > 0) {
      const ssize_t n = ::write(fd, p, size);
      if (n < 0) {
        if (errno == EINTR) continue;
        throw os_error("cannot write", path, errno);
      }
      p += n;
      size -= static_cast<size_t>(n);
    }
  };
  try {
    produce(sink);
  } catch (const std::exception& e) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw std::runtime_error(e.what());
  }
  if (::fsync(fd) != 0) throw fail("cannot flush", errno);
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw os_error("cannot close", path, err);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw os_error("cannot rename onto", path, err);
  }
  fsync_dir(target.parent_path());
}

void replace_symlink(const std::string& target, const std::string& link) {
  const std::filesystem::path l(link);
  const std::string tmp = temp_name(l);
  ::unlink(tmp.c_str());
  if (::symlink(target.c_str(), tmp.c_str()) != 0) throw os_error("cannot create the link", tmp, errno);
  if (::rename(tmp.c_str(), link.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw os_error("cannot move the link", link, err);
  }
  fsync_dir(l.parent_path());
}

}  // namespace composer
