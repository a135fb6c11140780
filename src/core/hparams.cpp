#include "composer/core/hparams.h"

#include "utils/detail/text.h"

#include <algorithm>
#include <stdexcept>

namespace composer {

Hparams::Hparams(std::map<std::string, std::string> values, std::string where)
    : values_(std::move(values)), where_(std::move(where)) {}

const std::string& Hparams::null_value() {
  static const std::string null("\x01null");
  return null;
}

const std::string* Hparams::find(const std::string& key) {
  asked_.insert(key);
  auto it = values_.find(key);
  return it == values_.end() || it->second == null_value() ? nullptr : &it->second;
}

bool Hparams::is_none(const std::string& key) {
  asked_.insert(key);
  auto it = values_.find(key);
  return it != values_.end() && (it->second == null_value() || it->second == "None");
}

void Hparams::error(const std::string& key, const std::string& message) const {
  throw std::invalid_argument(where_ + (where_.empty() ? "" : ".") + key + ": " + message);
}

void Hparams::missing(const std::string& key, const std::string& what) const {
  throw std::invalid_argument(where_ + (where_.empty() ? "" : ".") + key + ": required (" + what + ")");
}

void Hparams::fail(const std::string& key, const std::string& expected) const {
  throw std::invalid_argument(where_ + (where_.empty() ? "" : ".") + key + ": expected " + expected + ", got '" +
                              values_.at(key) + "'");
}

bool Hparams::has(const std::string& key) { return find(key) != nullptr; }

double Hparams::get_double(const std::string& key, double fallback) {
  const std::string* v = find(key);
  if (!v) return fallback;
  try {
    size_t used = 0;
    const double d = std::stod(*v, &used);
    if (used == v->size()) return d;
  } catch (const std::exception&) {
  }
  fail(key, "a number");
}

int64_t Hparams::get_int(const std::string& key, int64_t fallback) {
  const std::string* v = find(key);
  if (!v) return fallback;
  try {
    size_t used = 0;
    const long long i = std::stoll(*v, &used);
    if (used == v->size()) return i;
  } catch (const std::out_of_range&) {
    fail(key, "an integer within the int64 range");
  } catch (const std::exception&) {
  }
  fail(key, "an integer");
}

bool Hparams::get_bool(const std::string& key, bool fallback) {
  const std::string* v = find(key);
  if (!v) return fallback;
  const std::string l = composer::detail::to_lower(*v);
  if (l == "true" || l == "yes" || l == "on" || l == "1") return true;
  if (l == "false" || l == "no" || l == "off" || l == "0") return false;
  fail(key, "true or false");
}

std::string Hparams::get_string(const std::string& key, const std::string& fallback) {
  const std::string* v = find(key);
  return v ? *v : fallback;
}

std::string Hparams::get_choice(const std::string& key, const std::string& fallback,
                                const std::vector<std::string>& allowed) {
  const std::string* v = find(key);
  const std::string value =
      v ? (std::find(allowed.begin(), allowed.end(), *v) != allowed.end() ? *v : composer::detail::to_lower(*v))
        : fallback;
  if (std::find(allowed.begin(), allowed.end(), value) != allowed.end()) return value;
  std::string list;
  for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
  fail(key, "one of " + list);
}

void Hparams::check_all_used() const {
  for (const auto& [key, value] : values_) {
    if (asked_.count(key)) continue;
    std::string known;
    for (const auto& k : asked_) known += (known.empty() ? "" : ", ") + k;
    throw std::invalid_argument(where_ + (where_.empty() ? "" : ".") + key +
                                ": unknown hyperparameter; known: " + (known.empty() ? "(none)" : known));
  }
}

}  // namespace composer
