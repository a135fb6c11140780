// The algorithm registry: every method by its config name ("blurpool") and Composer class name ("BlurPool"), built
// from string hyperparameters, so YAML configs and `composer-cpp list algorithms` see all of them.
#pragma once

#include "composer/core/algorithm.h"
#include "composer/core/time.h"

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace composer::algorithms {

/// Hyperparameters as strings (YAML scalars). Every getter names the key on a bad value; check_all_used() rejects
/// keys no getter asked for, listing the known ones.
class Hparams {
 public:
  explicit Hparams(std::map<std::string, std::string> values = {}, std::string where = "");
  double get_double(const std::string& key, double fallback);
  int64_t get_int(const std::string& key, int64_t fallback);
  bool get_bool(const std::string& key, bool fallback);
  std::string get_string(const std::string& key, const std::string& fallback);
  /// Throws unless the value (or fallback) is one of `allowed`.
  std::string get_choice(const std::string& key, const std::string& fallback, const std::vector<std::string>& allowed);
  void check_all_used() const;

 private:
  const std::string* find(const std::string& key);
  [[noreturn]] void fail(const std::string& key, const std::string& expected) const;
  std::map<std::string, std::string> values_;
  std::string where_;
  std::set<std::string> asked_;
};

struct AlgorithmEntry {
  std::string name;        // config name, snake_case
  std::string class_name;  // Composer's class name
  std::string summary;     // one line: what it does and its hyperparameters
  std::function<std::shared_ptr<Algorithm>(Hparams&)> make;
};

/// All registered algorithms, sorted by name.
const std::vector<AlgorithmEntry>& algorithm_registry();
/// The entry for a config or class name, or nullptr.
const AlgorithmEntry* find_algorithm(const std::string& name);
/// Builds `name` (config or class name) from `hparams`; throws std::invalid_argument naming an unknown algorithm (with
/// the registered names), an unknown key or a bad value. Errors name keys as "<where>.<key>" (default: the name).
std::shared_ptr<Algorithm> make_algorithm(const std::string& name, const std::map<std::string, std::string>& hparams = {},
                                          const std::string& where = "");

/// Re-creates an algorithm from its repr, "BlurPool(replace_convs=True, min_channels=16)" (how checkpoints record
/// them). Throws std::invalid_argument naming the repr when it cannot be parsed or built.
std::shared_ptr<Algorithm> make_algorithm_from_repr(const std::string& repr);

}  // namespace composer::algorithms
