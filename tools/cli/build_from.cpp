#include "cli/build_from.h"

#include "composer/core/hparams.h"

namespace composer::cli {
namespace {

void add(std::map<std::string, std::string>& hparams, const ConfigNode& n, const std::string& prefix,
         const YAML::Node& node, const std::string& skip) {
  for (const auto& kv : node) {
    const std::string key = prefix + kv.first.as<std::string>();
    if (key == skip) continue;
    if (kv.second.IsNull()) {  // null (`key:`, `key: null`, `key=`): None for an optional field, else the default
      hparams[key] = Hparams::null_value();
      continue;
    }
    if (kv.second.IsScalar()) {
      hparams[key] = kv.second.Scalar();
      continue;
    }
    if (kv.second.IsMap()) {
      add(hparams, n, key + ".", kv.second, "");
      continue;
    }
    std::string list;
    bool scalars = kv.second.IsSequence();
    for (const auto& item : kv.second) {
      scalars = scalars && item.IsScalar();
      if (scalars) list += (list.empty() ? "" : ", ") + item.Scalar();
    }
    if (!scalars) throw ConfigError(n.key_path(key) + ": expected a scalar or a list of scalars");
    hparams[key] = "[" + list + "]";
  }
}

}  // namespace

std::map<std::string, std::string> hparams_of(const ConfigNode& n, const std::string& name_key) {
  std::map<std::string, std::string> hparams;
  if (n.yaml().IsMap()) add(hparams, n, "", n.yaml(), name_key);
  return hparams;
}

}  // namespace composer::cli
