#include "composer/utils/error_text.h"

#include <c10/util/Exception.h>

#include <regex>

namespace composer {

std::string brief_error_text(std::string m, size_t max_chars) {
  for (const char* marker : {"Exception raised from ", "frame #0", "\nframe #"}) {
    const auto at = m.find(marker);
    if (at != std::string::npos) m.erase(at);
  }
  static const std::regex enforce(R"(\[enforce fail at [^\]]*\]\s*\.?\s*)");
  m = std::regex_replace(m, enforce, "");
  // Source locations such as Gloo's "[/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:525] ".
  static const std::regex location(R"(\[[^\]\s]*\.(cc|cpp|h|hpp):\d+\]\s*)");
  m = std::regex_replace(m, location, "");
  std::string out;
  for (char c : m) {
    if (c == '\n' || c == '\r') {
      if (!out.empty() && out.back() != ' ') out += "; ";
    } else {
      out += c;
    }
  }
  while (!out.empty() && (out.back() == ' ' || out.back() == ';')) out.pop_back();
  if (out.size() > max_chars) out = out.substr(0, max_chars - 3) + "...";
  return out;
}

std::string brief_error(const std::exception& e, size_t max_chars) {
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&e))
    return brief_error_text(c10_error->what_without_backtrace(), max_chars);
  return brief_error_text(e.what(), max_chars);
}

}  // namespace composer
