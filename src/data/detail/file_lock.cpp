#include "data/detail/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace composer::detail {

FileLock::FileLock(const std::string& path, bool wait) {
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw std::runtime_error("cannot create the lock file '" + path + "': " + std::strerror(errno));
  int rc;
  do {
    rc = ::flock(fd_, LOCK_EX | (wait ? 0 : LOCK_NB));
  } while (rc != 0 && errno == EINTR);
  held_ = rc == 0;
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the description releases the lock
}

}  // namespace composer::detail
