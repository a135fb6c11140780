#include "composer/core/parallelism_fields.h"

#include "composer/core/fields.h"

#include <c10/core/ScalarType.h>

#include <stdexcept>

namespace composer::dist {

namespace {

std::string key_path(const Hparams& h, const std::string& key) {
  return h.where().empty() ? key : h.where() + "." + key;
}

}  // namespace

std::string field_text(ShardingStrategy value) { return composer::field_text(to_string(value)); }

void read_field(Hparams& h, const std::string& key, ShardingStrategy& value) {
  if (!h.has(key)) return;
  const std::string text = h.get_string(key, "");
  value = sharding_strategy_from_string(text, key_path(h, key));
}

std::string field_text(BackwardPrefetch value) { return composer::field_text(to_string(value)); }

void read_field(Hparams& h, const std::string& key, BackwardPrefetch& value) {
  if (!h.has(key)) return;
  const std::string text = h.get_string(key, "");
  value = backward_prefetch_from_string(text, key_path(h, key));
}

std::string field_text(const FSDPMixedPrecision& value) {
  if (!value.preset.empty()) return composer::field_text(value.preset);
  std::string out;
  const auto add = [&](const char* name, const std::optional<at::ScalarType>& dtype) {
    if (dtype) out += (out.empty() ? "" : ", ") + std::string("'") + name + "': " + composer::field_text(*dtype);
  };
  add("param_dtype", value.dtypes.param_dtype);
  add("reduce_dtype", value.dtypes.reduce_dtype);
  add("buffer_dtype", value.dtypes.buffer_dtype);
  return "{" + out + "}";
}

void read_field(Hparams& h, const std::string& key, FSDPMixedPrecision& value) {
  if (h.has(key)) {
    const FSDPMixedPrecision preset = FSDPMixedPrecision::of(h.get_string(key, ""));
    (void)resolve_mixed_precision(preset, at::kFloat, key_path(h, key));  // names the presets when unknown
    value = preset;
    return;
  }
  MixedPrecisionDtypes dtypes;
  bool given = false;
  const auto read = [&](const char* name, std::optional<at::ScalarType>& out) {
    const std::string dotted = key + "." + name;
    if (h.is_none(dotted)) given = true;  // Composer's None: not cast
    if (!h.has(dotted)) return;
    out = mixed_precision_dtype_from_string(h.get_string(dotted, ""), key_path(h, dotted));
    given = true;
  };
  read("param_dtype", dtypes.param_dtype);
  read("reduce_dtype", dtypes.reduce_dtype);
  read("buffer_dtype", dtypes.buffer_dtype);
  if (given) value = FSDPMixedPrecision::custom(dtypes);
}

std::vector<std::string> nested_keys(const FSDPMixedPrecision&) {
  return {"param_dtype", "reduce_dtype", "buffer_dtype"};
}

const std::map<std::string, std::string>& refused_parallelism_sections() {
  static const std::map<std::string, std::string> sections;
  return sections;
}

const std::map<std::string, std::string>& fixed_composer_keys(const TPOptions&) {
  static const std::map<std::string, std::string> keys;
  return keys;
}

const std::map<std::string, std::string>& fixed_composer_keys(const FSDPOptions&) {
  static const std::map<std::string, std::string> keys{
      {"backward_prefetch_limit", "1"},      {"cpu_offload", "false"},    {"forward_prefetch_limit", "1"},
      {"keep_low_precision_grads", "false"}, {"use_orig_params", "true"}, {"verbose", "false"},
  };
  return keys;
}

}  // namespace composer::dist
