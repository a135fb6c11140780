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
// Field types: bool, int64_t, double, std::string, Time, BatchKey, and enums for which field_text(E) and
// read_field(Hparams&, const std::string&, E&) are declared beside the enum (found by argument-dependent lookup;
// read_choice helps).
#pragma once

#include "composer/core/hparams.h"
#include "composer/core/time.h"
#include "composer/data/batch.h"

#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

namespace composer {

/// Python's spelling of a value, as a repr shows it: 0.2, 3, True, 'text', '2ep', 0 or 'image' for a batch key.
std::string field_text(double value);
std::string field_text(int64_t value);
std::string field_text(bool value);
std::string field_text(const std::string& value);
std::string field_text(const Time& value);
std::string field_text(const BatchKey& value);

/// The value at `key`, if present, into `value`; throws std::invalid_argument "<where>.<key>: expected ..., got '...'".
void read_field(Hparams& h, const std::string& key, double& value);
void read_field(Hparams& h, const std::string& key, int64_t& value);
void read_field(Hparams& h, const std::string& key, bool& value);
void read_field(Hparams& h, const std::string& key, std::string& value);
void read_field(Hparams& h, const std::string& key, Time& value);
/// A number is a positional key, anything else a named one.
void read_field(Hparams& h, const std::string& key, BatchKey& value);

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

/// `options` with every field `hparams` names replaced; unknown keys are an error listing the fields.
template <class Options>
Options read_options(Hparams& hparams, Options options = Options()) {
  Options::for_each_field(options,
                          [&](const char* name, auto& value, const char*) { read_field(hparams, name, value); });
  hparams.check_all_used();
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

/// {"field": value text, ...}: hyperparameters for the loggers (values as a repr shows them).
template <class Options>
nlohmann::json fields_json(const Options& options) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& f : describe_fields(options)) j[f.name] = f.value;
  return j;
}

}  // namespace composer
