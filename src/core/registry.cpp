#include "composer/core/registry.h"

#include "utils/detail/text.h"

namespace composer {

std::pair<std::string, std::map<std::string, std::string>> parse_repr(const std::string& text) {
  const std::string repr = detail::trim(text);
  const auto open = repr.find('(');
  if (open == std::string::npos || open == 0 || repr.back() != ')')
    throw std::invalid_argument("repr '" + repr + "' is not of the form Name(key=value, ...)");
  std::map<std::string, std::string> hparams;
  for (const std::string& item : split_top_level(repr.substr(open + 1, repr.size() - open - 2))) {
    if (detail::trim(item).empty()) continue;
    const auto eq = item.find('=');
    if (eq == std::string::npos)
      throw std::invalid_argument("repr '" + repr + "': argument '" + detail::trim(item) + "' has no '='");
    hparams[detail::trim(item.substr(0, eq))] = unquote(item.substr(eq + 1));
  }
  return {detail::trim(repr.substr(0, open)), hparams};
}

}  // namespace composer
