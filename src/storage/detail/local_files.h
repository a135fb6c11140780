// Local-file steps the object stores share: downloads that appear only complete, and crash-safe copies.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace composer::detail {

/// Makes `filename`'s folder, calls `fetch` with a temporary name beside it, then renames it to `filename`. The
/// temporary file is removed when `fetch` throws. Without overwrite an existing `filename` is an ObjectStoreError
/// naming it and `uri`.
void download_through_temporary(const std::string& filename, bool overwrite, const std::string& uri,
                                const std::function<void(const std::string& tmp)>& fetch);
/// Copies `from` to `to` through a temporary file, fsync and rename (utils/atomic_file.h).
void copy_file_atomically(const std::string& from, const std::string& to);
/// Bytes [offset, offset + length) of the file `path`; an ObjectStoreError naming `uri` when it cannot be read or
/// the range lies past its end.
std::string read_file_range(const std::string& path, int64_t offset, int64_t length, const std::string& uri);

}  // namespace composer::detail
