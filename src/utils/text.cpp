#include "utils/detail/text.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <regex>

namespace composer::detail {

std::string to_lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string trim(const std::string& s) {
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(" \t\r\n") - first + 1);
}

std::string python_float_str(double v) {
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v);
  std::string s(buf, res.ptr);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

bool parse_python_float(const std::string& s, double& out) {
  const auto is_space = [](unsigned char c) { return std::isspace(c) != 0; };
  size_t b = 0, e = s.size();
  while (b < e && is_space(s[b])) ++b;
  while (e > b && is_space(s[e - 1])) --e;
  std::string t;
  for (size_t i = b; i < e; ++i) {
    if (s[i] != '_') {
      t += s[i];
      continue;
    }
    // One underscore, between two digits.
    if (i == b || i + 1 == e || !std::isdigit(static_cast<unsigned char>(s[i - 1])) ||
        !std::isdigit(static_cast<unsigned char>(s[i + 1]))) {
      return false;
    }
  }
  static const std::regex literal(R"(^[+-]?((\d+\.?\d*|\.\d+)([eE][+-]?\d+)?|inf|infinity|nan)$)", std::regex::icase);
  if (!std::regex_match(t, literal)) return false;
  out = std::strtod(t.c_str(), nullptr);
  return true;
}

}  // namespace composer::detail
