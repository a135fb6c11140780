// Building a config section through a library registry: the section's keys become the entry's hyperparameters, so
// the CLI has no per-class code; unknown names list the registered ones and key errors name the key's path.
#pragma once

#include "cli/config_node.h"

#include <map>
#include <stdexcept>
#include <string>
#include <utility>

namespace composer::cli {

/// The mapping's keys other than `name_key` as hyperparameter strings: scalars as written, a list of scalars as
/// "[a, b]", a nested mapping as "parent.child" keys; a null value leaves the key at its default.
std::map<std::string, std::string> hparams_of(const ConfigNode& n, const std::string& name_key);

/// `registry`'s entry `name` built from the section's other keys (and the context the kind needs).
template <class Registry, class... Context>
auto build_from(const Registry& registry, const ConfigNode& n, const std::string& name, const std::string& name_key,
                Context&&... context) {
  if (!registry.find(name)) {
    throw ConfigError(n.key_path(name_key) + ": unknown " + registry.kind() + " '" + name +
                      "'; registered: " + registry.names());
  }
  const auto hparams = hparams_of(n, name_key);
  try {
    return registry.make(name, hparams, n.path(), std::forward<Context>(context)...);
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    throw ConfigError(!n.path().empty() && what.rfind(n.path(), 0) == 0 ? what : n.path() + ": " + what);
  }
}

}  // namespace composer::cli
