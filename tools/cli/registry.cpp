#include "cli/registry.h"

#include "composer/algorithms/registry.h"
#include "composer/callbacks/registry.h"
#include "composer/datasets/registry.h"
#include "composer/loggers/registry.h"
#include "composer/loss/registry.h"
#include "composer/models/registry.h"
#include "composer/optim/registry.h"
#include "composer/profiler/registry.h"

#include <map>
#include <stdexcept>

namespace composer::cli {
namespace {

const std::map<std::string, std::vector<RegistryEntry>>& tables() {
  static const std::map<std::string, std::vector<RegistryEntry>> all = [] {
    std::map<std::string, std::vector<RegistryEntry>> tables;
    const auto add = [&](const std::string& kind, const std::vector<RegisteredName>& listing) {
      for (const auto& a : listing) {
        std::string fields;
        for (const auto& f : a.fields) fields += (fields.empty() ? "" : ", ") + f.name + "=" + f.value;
        tables[kind].push_back({a.name, a.class_name + ": " + a.summary + (fields.empty() ? "" : " (" + fields + ")")});
      }
    };
    add("algorithms", algorithms::algorithm_registry().listing());
    add("callbacks", callbacks::callback_registry().listing());
    add("datasets", datasets::dataset_registry().listing());
    add("loggers", loggers::logger_registry().listing());
    add("losses", loss_registry().listing());
    add("models", models::model_registry().listing());
    add("optimizers", optim::optimizer_registry().listing());
    add("schedulers", optim::scheduler_registry().listing());
    add("trace_handlers", profiler::trace_handler_registry().listing());
    return tables;
  }();
  return all;
}

}  // namespace

std::vector<std::string> registry_kinds() {
  std::vector<std::string> k;
  for (const auto& [kind, entries] : tables()) k.push_back(kind);
  return k;
}

const std::vector<RegistryEntry>& registry(const std::string& kind) {
  auto it = tables().find(kind);
  if (it == tables().end()) {
    std::string kinds;
    for (const auto& k : registry_kinds()) kinds += (kinds.empty() ? "" : ", ") + k;
    throw std::invalid_argument("unknown kind '" + kind + "'; expected one of " + kinds);
  }
  return it->second;
}

}  // namespace composer::cli
