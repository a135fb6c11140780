// An advisory lock on a file (flock): held by one open description at a time, so it orders the processes of a node
// (and the threads of one process) that share a folder, such as StreamingDataset's cache.
#pragma once

#include <string>

namespace composer::detail {

class FileLock {
 public:
  /// Creates `path` if needed and locks it exclusively: waits for the holder, or with `wait` false returns unheld.
  /// Throws std::runtime_error naming the path when it cannot be created.
  explicit FileLock(const std::string& path, bool wait = true);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  bool held() const { return held_; }

 private:
  int fd_ = -1;
  bool held_ = false;
};

}  // namespace composer::detail
