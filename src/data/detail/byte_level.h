// Byte-level BPE's shared pieces: GPT-2's reversible byte <-> printable character table, UTF-8 characters, and the
// merge loop (the adjacent pair of lowest rank, every occurrence left to right, until no pair has a rank).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace composer::detail {

using MergeRanks = std::map<std::pair<std::string, std::string>, int64_t>;

/// The character (UTF-8) that stands for each byte: printable Latin-1 bytes for themselves, the others for U+0100 on.
const std::array<std::string, 256>& byte_characters();
/// The byte a character stands for, if it is one of byte_characters().
std::optional<unsigned char> character_byte(const std::string& character);
/// `bytes` written in byte characters.
std::string to_byte_level(const std::string& bytes);
/// The UTF-8 characters of `s` (a stray byte alone).
std::vector<std::string> utf8_characters(const std::string& s);
/// `parts` merged by `ranks`.
std::vector<std::string> merge_by_rank(std::vector<std::string> parts, const MergeRanks& ranks);

}  // namespace composer::detail
