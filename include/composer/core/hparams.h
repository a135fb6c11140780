// Hparams: hyperparameters as strings (YAML scalars, repr arguments), read with errors that name the key.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

namespace composer {

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
  /// Whether `key` was given (counts as asked for). A key given as null (null_value()) counts as not given.
  bool has(const std::string& key);
  /// Whether `key` was given as null: YAML's `key: null` (null_value()) or Python's None as a repr writes it ("None").
  /// An optional field then becomes unset; every other field keeps its default.
  bool is_none(const std::string& key);
  /// The value that stands for a YAML null.
  static const std::string& null_value();
  /// Where errors say the keys sit ("" or "schedulers[0]").
  const std::string& where() const { return where_; }
  void check_all_used() const;
  /// Throws std::invalid_argument "<where>.<key>: <message>" (a parser's own message about the key's value).
  [[noreturn]] void error(const std::string& key, const std::string& message) const;
  /// Throws std::invalid_argument "<where>.<key>: required (<what>)".
  [[noreturn]] void missing(const std::string& key, const std::string& what) const;
  /// Throws std::invalid_argument "<where>.<key>: expected <expected>, got '<value>'".
  [[noreturn]] void fail(const std::string& key, const std::string& expected) const;

 private:
  const std::string* find(const std::string& key);
  std::map<std::string, std::string> values_;
  std::string where_;
  std::set<std::string> asked_;
};

}  // namespace composer
