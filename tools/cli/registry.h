// What the CLI can build, by name, with one line each (`composer-cpp list KIND`), from the library's registries.
#pragma once

#include <string>
#include <vector>

namespace composer::cli {

struct RegistryEntry {
  std::string name;
  std::string summary;
};

/// Kinds: algorithms, callbacks, datasets, loggers, losses, models, optimizers, schedulers, trace_handlers.
std::vector<std::string> registry_kinds();
/// Throws std::invalid_argument naming the kind and the valid kinds.
const std::vector<RegistryEntry>& registry(const std::string& kind);

}  // namespace composer::cli
