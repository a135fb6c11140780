// What the subcommands share: a config file with KEY=VALUE overrides applied, and the exit codes of errors.
#pragma once

#include "cli/config_node.h"
#include "composer/utils/error_text.h"

#include <ostream>
#include <string>
#include <vector>

namespace composer::cli {

/// The YAML of `config` with each "KEY.PATH=VALUE" of `overrides` applied (an empty file is an empty map).
inline YAML::Node load_with_overrides(const std::string& config, const std::vector<std::string>& overrides) {
  YAML::Node root = load_config_file(config);
  if (!root || root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
  for (const auto& o : overrides) apply_override(root, o);
  return root;
}

/// f()'s exit code; a ConfigError is printed and exits 2, any other error exits 1 (its message without LibTorch's
/// stack text).
template <class F>
int run_guarded(std::ostream& err, F&& f) {
  try {
    return f();
  } catch (const ConfigError& e) {
    err << "composer-cpp: config error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    err << "composer-cpp: error: " << brief_error(e, 1000) << "\n";
    return 1;
  }
}

}  // namespace composer::cli
