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
#include <type_traits>
#include <utility>
#include <vector>

namespace composer::cli {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// Whether a field's type may be given as a mapping: nested_keys(value) names its keys (found by lookup).
template <class T, class = void>
struct HasNestedKeys : std::false_type {};
template <class T>
struct HasNestedKeys<T, std::void_t<decltype(nested_keys(std::declval<const T&>()))>> : std::true_type {};

// One section of parallelism_config: its options' field list, and Composer's keys that the engine holds at their
// default (accepted at that value only, then dropped). A field whose type lists nested_keys() may be a mapping
// (mixed_precision: {param_dtype, ...}), whose keys are checked here and arrive as dotted keys.
template <class Options>
Options build_section(const ConfigNode& section) {
  std::vector<std::string> keys;
  for (const auto& field : describe_fields<Options>()) keys.push_back(field.name);
  const Options defaults;
  const auto& fixed_keys = fixed_composer_keys(defaults);
  for (const auto& [key, fixed] : fixed_keys) keys.push_back(key);
  section.expect_keys(keys);
  Options::for_each_field(defaults, [&](const char* key, const auto& value, const char*) {
    using Field = std::decay_t<decltype(value)>;
    if constexpr (HasNestedKeys<Field>::value)  // a value given as a mapping (mixed_precision)
      if (section.has(key) && section.yaml()[key].IsMap()) section.child(key).expect_keys(nested_keys(value));
  });
  std::map<std::string, std::string> values = hparams_of(section, "");
  for (const auto& [key, fixed] : fixed_keys) {
    const auto it = values.find(key);
    if (it == values.end()) continue;
    if (lower(it->second) != fixed && it->second != Hparams::null_value()) {
      throw ConfigError(section.key_path(key) + ": only Composer's default (" + fixed +
                        ") is supported by Composer C++ so far, got '" + it->second + "'");
    }
    values.erase(it);
  }
  try {
    Hparams hparams(values, section.path());
    return read_options<Options>(hparams);
  } catch (const std::invalid_argument& e) {
    throw ConfigError(e.what());  // names the key already
  }
}

}  // namespace

dist::ParallelismConfig build_parallelism(const ConfigNode& n) {
  dist::ParallelismConfig config;
  std::vector<std::string> sections;
  dist::for_each_parallelism_section(config, [&](const char* key, auto&) { sections.push_back(key); });
  for (const auto& [key, why] : dist::refused_parallelism_sections()) sections.push_back(key);
  n.expect_keys(sections);
  for (const auto& [key, why] : dist::refused_parallelism_sections())
    if (n.has(key)) throw ConfigError(n.key_path(key) + ": " + why);
  dist::for_each_parallelism_section(config, [&](const char* key, auto& section) {
    using Options = typename std::decay_t<decltype(section)>::value_type;
    if (n.has(key)) section = build_section<Options>(n.child(key));
  });
  try {
    config.validate();
  } catch (const std::invalid_argument& e) {
    throw ConfigError(e.what());
  }
  return config;
}

}  // namespace composer::cli
