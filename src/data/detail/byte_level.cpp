#include "data/detail/byte_level.h"

#include <limits>
#include <unordered_map>

namespace composer::detail {
namespace {

std::string utf8(uint32_t cp) {  // code points below U+0800 suffice for the byte table
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

struct ByteTable {
  std::array<std::string, 256> to_char;
  std::unordered_map<std::string, unsigned char> to_byte;
  ByteTable() {
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      to_char[b] = utf8(printable ? b : next++);
      to_byte[to_char[b]] = static_cast<unsigned char>(b);
    }
  }
};

const ByteTable& table() {
  static const ByteTable t;
  return t;
}

}  // namespace

const std::array<std::string, 256>& byte_characters() { return table().to_char; }

std::optional<unsigned char> character_byte(const std::string& character) {
  const auto it = table().to_byte.find(character);
  if (it == table().to_byte.end()) return std::nullopt;
  return it->second;
}

std::string to_byte_level(const std::string& bytes) {
  std::string out;
  for (unsigned char c : bytes) out += table().to_char[c];
  return out;
}

std::vector<std::string> utf8_characters(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t n = std::min(s.size() - i, static_cast<size_t>(c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1));
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

std::vector<std::string> merge_by_rank(std::vector<std::string> parts, const MergeRanks& ranks) {
  while (parts.size() > 1) {
    int64_t best = std::numeric_limits<int64_t>::max();
    const std::pair<std::string, std::string>* pair = nullptr;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      const auto it = ranks.find({parts[i], parts[i + 1]});
      if (it != ranks.end() && it->second < best) {
        best = it->second;
        pair = &it->first;
      }
    }
    if (!pair) break;
    std::vector<std::string> merged;
    merged.reserve(parts.size());
    for (size_t i = 0; i < parts.size(); ++i) {
      if (i + 1 < parts.size() && parts[i] == pair->first && parts[i + 1] == pair->second) {
        merged.push_back(parts[i] + parts[i + 1]);
        ++i;
      } else {
        merged.push_back(std::move(parts[i]));
      }
    }
    parts = std::move(merged);
  }
  return parts;
}

}  // namespace composer::detail
