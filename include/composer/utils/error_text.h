// Error messages for people: LibTorch's exceptions carry a source location, a C++ frame list and "enforce fail"
// markers that mean nothing to a user. brief_error keeps what the error says.
#pragma once

#include <exception>
#include <string>

namespace composer {

/// The message of `e` without LibTorch's "Exception raised from ..." location, frame list, "[enforce fail at
/// file:line] ." prefix and "[path/file.cc:N] " source locations (Gloo's), on one line (newlines become "; "), at most
/// `max_chars` characters.
std::string brief_error(const std::exception& e, size_t max_chars = 300);
/// The same for a message already taken out of an exception.
std::string brief_error_text(std::string message, size_t max_chars = 300);

}  // namespace composer
