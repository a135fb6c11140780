#include "composer/core/registry.h"

#include "utils/detail/text.h"

namespace composer {
namespace {

// The top-level comma-separated items of `args`: commas inside brackets or quotes do not split.
std::vector<std::string> top_level_items(const std::string& args) {
  std::vector<std::string> items;
  std::string item;
  int depth = 0;
  char quote = 0;
  for (char c : args) {
    if (quote) {
      if (c == quote) quote = 0;
    } else if (c == '\'' || c == '"') {
      quote = c;
    } else if (c == '[' || c == '(') {
      ++depth;
    } else if ((c == ']' || c == ')') && depth > 0) {
      --depth;
    } else if (c == ',' && depth == 0) {
      items.push_back(item);
      item.clear();
      continue;
    }
    item += c;
  }
  items.push_back(item);
  return items;
}

std::string unquote(std::string v) {
  v = detail::trim(v);
  if (v.size() >= 2 && (v.front() == '\'' || v.front() == '"') && v.back() == v.front()) v = v.substr(1, v.size() - 2);
  return v;
}

}  // namespace

std::pair<std::string, std::map<std::string, std::string>> parse_repr(const std::string& text) {
  const std::string repr = detail::trim(text);
  const auto open = repr.find('(');
  if (open == std::string::npos || open == 0 || repr.back() != ')')
    throw std::invalid_argument("repr '" + repr + "' is not of the form Name(key=value, ...)");
  std::map<std::string, std::string> hparams;
  for (const std::string& item : top_level_items(repr.substr(open + 1, repr.size() - open - 2))) {
    if (detail::trim(item).empty()) continue;
    const auto eq = item.find('=');
    if (eq == std::string::npos)
      throw std::invalid_argument("repr '" + repr + "': argument '" + detail::trim(item) + "' has no '='");
    hparams[detail::trim(item.substr(0, eq))] = unquote(item.substr(eq + 1));
  }
  return {detail::trim(repr.substr(0, open)), hparams};
}

}  // namespace composer
