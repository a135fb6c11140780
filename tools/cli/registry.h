// What the CLI can build, by name, with one line each (`composer-cpp list KIND`).
#pragma once

#include <string>
#include <vector>

namespace composer::cli {

struct RegistryEntry {
  std::string name;
  std::string summary;
};

/// Kinds: algorithms, callbacks, datasets, loggers, models, optimizers, schedulers.
std::vector<std::string> registry_kinds();
/// Throws std::invalid_argument naming the kind and the valid kinds.
const std::vector<RegistryEntry>& registry(const std::string& kind);
/// Throws ConfigError "<path>: unknown <kind> '<name>'; registered: ..." when `name` is not registered.
void require_registered(const std::string& kind, const std::string& name, const std::string& path);

}  // namespace composer::cli
