// Verifies every record of a torch.save zip archive against the CRC-32 in its central directory. LibTorch's reader
// (miniz built with MINIZ_DISABLE_ZIP_READER_CRC32_CHECKS) does not, so a checkpoint whose tensor bytes were damaged
// would otherwise load silently.
#pragma once

#include <cstdint>
#include <string>

namespace composer::detail {

/// Number of records checked. Throws std::runtime_error naming the first damaged or unreadable record (or a
/// malformed directory); `path` appears in no message, the caller names the file.
int64_t verify_zip_records(const std::string& path);

}  // namespace composer::detail
