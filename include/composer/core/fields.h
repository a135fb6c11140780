// Field lists: one list per options struct names each field once, with its member and a one-line doc, and drives
// repr, re-creation from a repr or a YAML mapping (strict: unknown keys and bad values name the key), hyperparameter
// logging and the docs tables. An options struct declares it as a static member template:
//
//   struct MixUpOptions {
//     TORCH_ARG(double, alpha) = 0.2;
//     TORCH_ARG(bool, interpolate_loss) = false;
//     template <class Self, class Visit>
//     static void for_each_field(Self& self, Visit&& visit) {
//       visit("alpha", self.alpha_, "Beta(alpha, alpha) concentration; 0 disables mixing");
//       visit("interpolate_loss", self.interpolate_loss_, "interpolate the two losses instead of the targets");
//     }
//   };
//
// Field types: bool, int64_t, double, std::string, Time, BatchKey, lists of bool/int64_t/double/string/Time
// (std::vector, written "[a, b]"), std::optional of any of these for a value that may stay unset ("None"), Required<T>
// for a required argument (unset, read_options names it), EnsureTime for a Time where a bare integer takes a unit (as
// Composer's ensure_time), and enums for which field_text(E) and
// read_field(Hparams&, const std::string&, E&) are declared beside the enum (found by argument-dependent lookup;
// read_choice helps).
#pragma once

#include "composer/core/event.h"
#include "composer/core/hparams.h"
#include "composer/core/time.h"
#include "composer/data/batch.h"

#include <c10/core/ScalarType.h>
#include <nlohmann/json.hpp>

#include <array>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace composer {

/// Python's spelling of a value, as a repr shows it: 0.2, 3, True, 'text', '2ep', 0 or 'image' for a batch key.
std::string field_text(double value);
std::string field_text(int64_t value);
std::string field_text(int value);
std::string field_text(uint64_t value);
std::string field_text(bool value);
std::string field_text(const std::string& value);
std::string field_text(const Time& value);
std::string field_text(const BatchKey& value);
/// The event's value in quotes, 'init' (Composer's str(Event.INIT)).
std::string field_text(Event value);
/// Python's tuple repr, (0.9, 0.999) (Adam's betas).
std::string field_text(const std::tuple<double, double>& value);
/// torch's attribute name in quotes: 'float32', 'bfloat16', 'int64'.
std::string field_text(at::ScalarType value);

/// A value of T to read into (Time has no default).
template <class T>
T placeholder() {
  if constexpr (std::is_same_v<T, Time>) {
    return Time::from_batch(0);
  } else {
    return T{};
  }
}

/// The value at `key`, if present, into `value`; throws std::invalid_argument "<where>.<key>: expected ..., got '...'".
void read_field(Hparams& h, const std::string& key, double& value);
void read_field(Hparams& h, const std::string& key, int64_t& value);
void read_field(Hparams& h, const std::string& key, int& value);
/// A non-negative integer (a seed).
void read_field(Hparams& h, const std::string& key, uint64_t& value);
void read_field(Hparams& h, const std::string& key, bool& value);
void read_field(Hparams& h, const std::string& key, std::string& value);
void read_field(Hparams& h, const std::string& key, Time& value);
/// A number is a positional key, anything else a named one.
void read_field(Hparams& h, const std::string& key, BatchKey& value);
/// An event by value or name in any case: 'init', 'INIT', 'Event.INIT'.
void read_field(Hparams& h, const std::string& key, Event& value);
/// Two numbers, "[0.9, 0.999]" or "(0.9, 0.999)".
void read_field(Hparams& h, const std::string& key, std::tuple<double, double>& value);
/// A dtype by torch's name, with or without "torch." (float32, bfloat16, int64, ...), or the aliases fp32, fp16,
/// half, bf16, fp64, double.
void read_field(Hparams& h, const std::string& key, at::ScalarType& value);

/// A required argument: std::optional, but read_options reports it when a config leaves it unset.
template <class T>
struct Required : std::optional<T> {
  using std::optional<T>::optional;
  using std::optional<T>::operator=;
};

/// The value of a required argument set in code, or std::invalid_argument "<who>: <field> is required (<expected>)".
template <class T>
const T& required_value(const Required<T>& value, const char* who, const char* field, const char* expected) {
  if (!value) throw std::invalid_argument(std::string(who) + ": " + field + " is required (" + expected + ")");
  return *value;
}

/// A Time field where a bare integer is a count of `unit` (Composer's ensure_time: max_duration 2 is 2 epochs).
/// The field list visits ensure_time(unit, self.field_) in place of the member.
template <class T>
struct EnsureTime {
  T& value;
  TimeUnit unit;
};
template <class T>
EnsureTime<T> ensure_time(TimeUnit unit, T& value) {
  return {value, unit};
}

/// Python's list repr: [256, 256], ['10ep', '20ep'].
template <class T>
std::string field_text(const std::vector<T>& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + field_text(values[i]);
  return out + "]";
}

/// "None" for a required field not yet given.
template <class T>
std::string field_text(const std::optional<T>& value) {
  return value ? field_text(*value) : "None";
}

/// The comma-separated items of `text` as written (blanks kept); commas inside brackets, parentheses or quotes do not
/// split: "a=1, b=[1, 2], c='x, y'" has three items. The one splitter of lists and reprs.
std::vector<std::string> split_top_level(const std::string& text);
/// `text` without surrounding blanks and one pair of matching quotes.
std::string unquote(const std::string& text);
/// The items of a list value, "[a, 'b', c]", "(a, b)" or "a, b, c" (quotes and blanks around items dropped; "[]" is
/// empty; a quoted comma stays in its item).
std::vector<std::string> split_list(const std::string& text);

/// A list, "[a, b]" or "a, b"; each item is read as one T, errors naming the key.
template <class T>
void read_field(Hparams& h, const std::string& key, std::vector<T>& values) {
  if (!h.has(key)) return;
  std::vector<T> read;
  for (const std::string& item : split_list(h.get_string(key, ""))) {
    Hparams one({{key, item}}, h.where());
    T value = values.empty() ? placeholder<T>() : values.front();
    read_field(one, key, value);
    read.push_back(std::move(value));
  }
  values = std::move(read);
}

/// An optional (or required) field: set when `key` is given; null (YAML's, or "None", Python's as a repr writes it)
/// unsets it.
template <class T>
void read_field(Hparams& h, const std::string& key, std::optional<T>& value) {
  if (h.is_none(key)) {
    value.reset();
    return;
  }
  if (!h.has(key)) return;
  T v = value ? *value : placeholder<T>();
  read_field(h, key, v);
  value = std::move(v);
}

template <class T>
std::string field_text(const EnsureTime<T>& field) {
  return field_text(field.value);
}

/// A time, or a bare integer in the field's unit; errors name the key.
Time read_time(Hparams& h, const std::string& key, TimeUnit int_unit);

template <class T>
void read_field(Hparams& h, const std::string& key, EnsureTime<T>&& field) {
  if (h.has(key)) field.value = read_time(h, key, field.unit);
}

/// For enum fields: reads one of the names in `choices` (case-insensitive) into `value`.
template <class E>
void read_choice(Hparams& h, const std::string& key, E& value, const std::vector<std::pair<std::string, E>>& choices) {
  std::string current;
  std::vector<std::string> names;
  for (const auto& [name, e] : choices) {
    names.push_back(name);
    if (e == value) current = name;
  }
  const std::string chosen = h.get_choice(key, current, names);
  for (const auto& [name, e] : choices)
    if (name == chosen) value = e;
}

/// The name of a choice (the inverse of read_choice's table).
template <class E>
std::string choice_text(E value, const std::vector<std::pair<std::string, E>>& choices) {
  for (const auto& [name, e] : choices)
    if (e == value) return field_text(name);
  return "'?'";
}

/// One documented field: its name, its default (or current) value as a repr shows it, and its one-line doc.
struct FieldDoc {
  std::string name;
  std::string value;
  std::string doc;
};

/// "Cls(field=value, ...)" in the field list's order (Composer's repr of an algorithm).
template <class Options>
std::string options_repr(const std::string& class_name, const Options& options) {
  std::string out = class_name + "(";
  bool first = true;
  Options::for_each_field(options, [&](const char* name, const auto& value, const char*) {
    out += (first ? "" : ", ") + std::string(name) + "=" + field_text(value);
    first = false;
  });
  return out + ")";
}

/// A visitor that hands `visit` the fields of another struct's list under other keys: each pair is {its key, the key
/// used here} (Composer's Trainer calls CheckpointSaver's `folder` save_folder); keys not listed keep theirs. Used to
/// nest one field list inside another: Sub::for_each_field(self.sub_, renamed(visit, kSubKeys)).
template <class Visit, size_t N>
auto renamed(Visit& visit, const std::array<std::pair<const char*, const char*>, N>& keys) {
  return [&visit, &keys](const char* key, auto&& value, const char* doc) {
    for (const auto& [own, here] : keys)
      if (std::strcmp(own, key) == 0) key = here;
    visit(key, std::forward<decltype(value)>(value), doc);
  };
}

/// A visitor that hands `visit` another struct's fields under `prefix` + their keys ("lora." + "r"): nests one field
/// list inside another as dotted keys, as the CLI flattens a nested YAML mapping. LoraFields::for_each_field(self,
/// visit) is LoraOptions::for_each_field(self.options, prefixed(visit, "lora.")).
template <class Visit>
auto prefixed(Visit& visit, const char* prefix) {
  return [&visit, prefix](const char* key, auto&& value, const char* doc) {
    const std::string full = std::string(prefix) + key;
    visit(full.c_str(), std::forward<decltype(value)>(value), doc);
  };
}

/// Whether a field is a required one still unset.
template <class T>
bool unset_field(const T&) {
  return false;
}
template <class T>
bool unset_field(const Required<T>& value) {
  return !value.has_value();
}

/// `options` with every field `hparams` names replaced; unknown keys are an error listing the fields, and a required
/// (std::optional) field left unset is "<where>.<key>: required (<its doc>)".
template <class Options>
Options read_options(Hparams& hparams, Options options = Options()) {
  Options::for_each_field(options, [&](const char* name, auto&& value, const char*) {
    read_field(hparams, name, std::forward<decltype(value)>(value));
  });
  hparams.check_all_used();
  Options::for_each_field(options, [&](const char* name, const auto& value, const char* doc) {
    if (!unset_field(value)) return;
    const std::string what = doc;
    hparams.missing(name, what.rfind("required: ", 0) == 0 ? what.substr(10) : what);
  });
  return options;
}

/// Each field with its value in `options` (the defaults for a default-constructed one) and its doc.
template <class Options>
std::vector<FieldDoc> describe_fields(const Options& options = Options()) {
  std::vector<FieldDoc> docs;
  Options::for_each_field(options, [&](const char* name, const auto& value, const char* doc) {
    docs.push_back({name, field_text(value), doc});
  });
  return docs;
}

/// The docs table of a field list: "| name | default | meaning |" rows in Markdown (each algorithm's docs page holds
/// its table verbatim; tests/algorithms/conformance_test.cpp checks it).
std::string fields_table(const std::vector<FieldDoc>& fields);

/// A field's value as JSON: numbers, booleans, strings (times as "2ep"), lists, null for an unset optional.
template <class T>
nlohmann::json field_json(const T& value) {
  if constexpr (std::is_arithmetic_v<T>) {
    return value;
  } else if constexpr (std::is_same_v<T, std::string>) {
    return value;
  } else {
    std::string text = field_text(value);
    if (text.size() >= 2 && text.front() == '\'' && text.back() == '\'') text = text.substr(1, text.size() - 2);
    return text;
  }
}
template <class T>
nlohmann::json field_json(const std::optional<T>& value) {
  return value ? field_json(*value) : nlohmann::json(nullptr);
}
template <class T>
nlohmann::json field_json(const Required<T>& value) {
  return value ? field_json(*value) : nlohmann::json(nullptr);
}
template <class T>
nlohmann::json field_json(const std::vector<T>& values) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& v : values) list.push_back(field_json(v));
  return list;
}
template <class T>
nlohmann::json field_json(const EnsureTime<T>& field) {
  return field_json(field.value);
}

/// {"field": value, ...}: hyperparameters for the loggers.
template <class Options>
nlohmann::json fields_json(const Options& options) {
  nlohmann::json j = nlohmann::json::object();
  Options::for_each_field(options,
                          [&](const char* name, const auto& value, const char*) { j[name] = field_json(value); });
  return j;
}

}  // namespace composer
