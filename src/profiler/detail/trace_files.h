// What the profiler's writers share: the wall clock of their events, their output folder's check at INIT, and the
// ".gz" suffix of gzipped traces.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>

namespace composer::detail {

/// Nanoseconds since the epoch (the traces' clock).
inline int64_t wall_clock_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

inline bool ends_with_gz(const std::string& name) {
  return name.size() >= 3 && name.compare(name.size() - 3, 3, ".gz") == 0;
}

/// Creates `folder` and, unless `overwrite`, refuses one that already holds files; `what` names the setting
/// ("JSONTraceHandler folder") and `overwrite_key` the option that allows it.
inline void prepare_trace_folder(const std::string& folder, bool overwrite, const std::string& what,
                                 const std::string& overwrite_key) {
  std::error_code ec;
  std::filesystem::create_directories(folder, ec);
  if (ec) throw std::runtime_error(what + " " + folder + ": cannot be created (" + ec.message() + ")");
  if (!overwrite && !std::filesystem::is_empty(folder)) {
    throw std::invalid_argument(what + " " + folder + ": not empty; choose an empty folder or set " + overwrite_key +
                                ": true");
  }
}

}  // namespace composer::detail
