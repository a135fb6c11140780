// Strict reading of YAML configs: every key is known, every value has the expected type, and every error names
// the key path ("train_data.batch_size") and what is allowed.
#pragma once

#include <yaml-cpp/yaml.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace composer::cli {

/// A bad config: the message starts with the key path.
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A mapping (or sequence) of the config with its key path.
class ConfigNode {
 public:
  ConfigNode(YAML::Node node, std::string path);

  const std::string& path() const { return path_; }
  const YAML::Node& yaml() const { return node_; }
  /// Throws ConfigError naming the first key not in `allowed`, with the allowed keys.
  void expect_keys(const std::vector<std::string>& allowed) const;
  bool has(const std::string& key) const;
  /// The key's path, "parent.key".
  std::string key_path(const std::string& key) const;

  int64_t get_int(const std::string& key, int64_t fallback) const;
  /// YAML's booleans (true/false, yes/no, on/off); ConfigError naming the key otherwise.
  bool get_bool(const std::string& key, bool fallback) const;
  std::string get_string(const std::string& key, const std::string& fallback) const;
  std::string require_string(const std::string& key) const;
  /// A nested mapping; an absent key gives an empty mapping.
  ConfigNode child(const std::string& key) const;
  /// A sequence of mappings; an absent key gives none.
  std::vector<ConfigNode> children(const std::string& key) const;
  /// Requires the value to be positive (or non-negative when allow_zero).
  static int64_t positive(int64_t v, const std::string& path, bool allow_zero = false);

 private:
  YAML::Node scalar(const std::string& key) const;
  YAML::Node node_;
  std::string path_;
};

/// Loads a YAML file; throws ConfigError naming the file on a missing file or a syntax error.
YAML::Node load_config_file(const std::string& path);
/// Applies "a.b.c=value" (value parsed as YAML; numeric parts index sequences). Throws ConfigError when the
/// override is malformed.
void apply_override(YAML::Node& root, const std::string& assignment);

}  // namespace composer::cli
