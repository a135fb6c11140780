#include "cli/build_parallelism.h"

#include "cli/build_from.h"
#include "composer/core/fields.h"
#include "composer/core/hparams.h"
#include "composer/core/parallelism_fields.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace composer::cli {
namespace {

// Composer's FSDPConfig keys this engine does not vary, with the default it matches (lower case).
const std::map<std::string, std::string> kComposerDefaults{
    {"backward_prefetch_limit", "1"},      {"cpu_offload", "false"},    {"forward_prefetch_limit", "1"},
    {"keep_low_precision_grads", "false"}, {"use_orig_params", "true"}, {"verbose", "false"},
};

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// The keys of the fsdp section: FSDPOptions' field list, and Composer's keys held at their defaults.
std::vector<std::string> fsdp_keys() {
  std::vector<std::string> keys;
  for (const auto& field : describe_fields<dist::FSDPOptions>()) keys.push_back(field.name);
  for (const auto& [key, fixed] : kComposerDefaults) keys.push_back(key);
  return keys;
}

}  // namespace

dist::ParallelismConfig build_parallelism(const ConfigNode& n) {
  n.expect_keys({"fsdp", "tp"});
  if (n.has("tp")) throw ConfigError(n.key_path("tp") + ": tensor parallelism is not supported by Composer C++");
  dist::ParallelismConfig config;
  if (!n.has("fsdp")) return config;
  const ConfigNode f = n.child("fsdp");
  f.expect_keys(fsdp_keys());
  if (f.has("mixed_precision") && f.yaml()["mixed_precision"].IsMap())
    f.child("mixed_precision").expect_keys({"param_dtype", "reduce_dtype", "buffer_dtype"});
  std::map<std::string, std::string> values = hparams_of(f, "");
  for (const auto& [key, fixed] : kComposerDefaults) {
    const auto it = values.find(key);
    if (it == values.end()) continue;
    if (lower(it->second) != fixed && it->second != Hparams::null_value()) {
      throw ConfigError(f.key_path(key) + ": only Composer's default (" + fixed +
                        ") is supported by Composer C++ so far, got '" + it->second + "'");
    }
    values.erase(it);
  }
  if (const auto it = values.find("state_dict_type"); it != values.end()) it->second = lower(it->second);
  try {
    Hparams hparams(values, f.path());
    config.fsdp(read_options<dist::FSDPOptions>(hparams));
    config.validate();
  } catch (const std::invalid_argument& e) {
    throw ConfigError(e.what());  // names the key already
  }
  return config;
}

}  // namespace composer::cli
