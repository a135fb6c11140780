#include "cli/registry.h"

#include "cli/config_node.h"
#include "composer/algorithms/registry.h"
#include "composer/callbacks/registry.h"
#include "composer/loggers/registry.h"
#include "composer/models/registry.h"
#include "composer/optim/registry.h"

#include <map>
#include <stdexcept>

namespace composer::cli {
namespace {

const std::map<std::string, std::vector<RegistryEntry>>& tables() {
  static const std::map<std::string, std::vector<RegistryEntry>> t{
      {"datasets",
       {{"mnist", "MNIST digits from IDX files (tools/fetch_data.sh): path, split, limit, normalize"},
        {"fashion_mnist",
         "Fashion-MNIST from gzip IDX files: path, split, limit, normalize, crop_padding, horizontal_flip"},
        {"synthetic_images", "random images with a learnable labelling: num_samples, channels, size, num_classes"},
        {"mobydick_chars", "Moby Dick, character level: path, seq_len, text_limit, val_fraction"},
        {"gpt2_tokens", "a text file in GPT-2 BPE tokens: path, vocab_dir, seq_len, text_limit, val_fraction"},
        {"synthetic_tokens", "random token sequences: num_samples, seq_len, vocab_size"}}},
  };
  static const std::map<std::string, std::vector<RegistryEntry>> all = [] {
    auto tables = t;
    const auto add = [&](const std::string& kind, const std::vector<RegisteredName>& listing) {
      for (const auto& a : listing) {
        std::string fields;
        for (const auto& f : a.fields) fields += (fields.empty() ? "" : ", ") + f.name + "=" + f.value;
        tables[kind].push_back({a.name, a.class_name + ": " + a.summary + (fields.empty() ? "" : " (" + fields + ")")});
      }
    };
    add("algorithms", algorithms::algorithm_registry().listing());
    add("callbacks", callbacks::callback_registry().listing());
    add("loggers", loggers::logger_registry().listing());
    add("models", models::model_registry().listing());
    add("optimizers", optim::optimizer_registry().listing());
    add("schedulers", optim::scheduler_registry().listing());
    return tables;
  }();
  return all;
}

std::string names(const std::vector<RegistryEntry>& entries) {
  if (entries.empty()) return "(none yet)";
  std::string out;
  for (const auto& e : entries) out += (out.empty() ? "" : ", ") + e.name;
  return out;
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

void require_registered(const std::string& kind, const std::string& name, const std::string& path) {
  const auto& entries = registry(kind);
  for (const auto& e : entries)
    if (e.name == name) return;
  std::string singular = kind.substr(0, kind.size() - 1);
  throw ConfigError(path + ": unknown " + singular + " '" + name + "'; registered: " + names(entries));
}

}  // namespace composer::cli
