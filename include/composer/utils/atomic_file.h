// Crash-safe file replacement.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace composer {

/// Writes `bytes` to `path` so that `path` always holds either its old content or all of the new: a temporary file
/// in the same folder, written, fsynced, renamed over `path`, then the folder fsynced. On any failure (a full disk,
/// a write error) the temporary file is removed and std::runtime_error names the file and the OS error.
void write_file_atomically(const std::string& path, const std::vector<char>& bytes);

/// Receives bytes to append to the file being written; throws on a write error.
using ByteSink = std::function<void(const void* data, size_t size)>;
/// The same guarantees, with the content streamed: `produce` calls the sink as many times as it likes.
void write_file_atomically(const std::string& path, const std::function<void(const ByteSink& sink)>& produce);

/// Points the symbolic link `link` at `target` (a path relative to the link's folder) atomically: a temporary link,
/// then a rename over `link`.
void replace_symlink(const std::string& target, const std::string& link);

}  // namespace composer
