// What Hugging Face model directories share, whatever the architecture: config.json's fields with the class
// defaults for absent ones, the safetensors files (one, or the shards an index names) and writing them as
// save_pretrained does (shards above max_shard_bytes, with model.safetensors.index.json).
#pragma once

#include "composer/formats/safetensors.h"
#include "composer/models/hf_model.h"

#include <ATen/core/ScalarType.h>
#include <nlohmann/json.hpp>

#include <stdexcept>
#include <string>
#include <vector>

namespace composer::models::detail {

/// The JSON file at `path`; std::runtime_error naming `what` and the path when it is missing or not JSON.
nlohmann::json read_json(const std::string& path, const std::string& what);

/// A field of config.json, or `fallback` when it is absent or null (Hugging Face's class default).
template <class T>
T config_field(const nlohmann::json& j, const char* key, T fallback, const std::string& path) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  try {
    return j[key].get<T>();
  } catch (const nlohmann::json::exception&) {
    throw std::runtime_error("config '" + path + "': " + key + " is " + j[key].dump() + ", of the wrong type");
  }
}

/// std::runtime_error "config '<path>': <what>" unless `ok`.
inline void require_config(bool ok, const std::string& path, const std::string& what) {
  if (!ok) throw std::runtime_error("config '" + path + "': " + what);
}

/// `config` once its validate() passes; the std::invalid_argument it throws becomes a std::runtime_error naming the
/// config file.
template <class Config>
Config validated(Config config, const std::string& path) {
  try {
    config.validate();
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error("config '" + path + "': " + e.what());
  }
  return config;
}

/// The shard files of `dir`: model.safetensors, or those model.safetensors.index.json names.
std::vector<std::string> shard_files(const std::string& dir);

/// config.json's torch_dtype for `dtype` ("float32", "bfloat16", "float16").
std::string torch_dtype_name(at::ScalarType dtype);

/// std::invalid_argument for a dtype that is not floating or a shard size that is not positive.
void check_save_options(const SavePretrainedOptions& options);

/// Writes `tensors` (in order) into `dir` as model.safetensors, or as model-0000i-of-0000N.safetensors shards of at
/// most `max_shard_bytes` each with model.safetensors.index.json, replacing the weights written there before.
void write_pretrained_weights(const std::string& dir, const NamedTensors& tensors, int64_t max_shard_bytes);

}  // namespace composer::models::detail
