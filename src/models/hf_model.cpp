#include "composer/models/hf_model.h"

#include "composer/formats/safetensors.h"
#include "models/detail/named_weights.h"
#include "utils/detail/text_file.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <stdexcept>

namespace composer::models {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json read_json(const std::string& path, const std::string& what) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(what + " '" + path + "' cannot be opened (missing?)");
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    throw std::runtime_error(what + " '" + path + "' is not valid JSON: " + e.what());
  }
}

// A field of config.json, or `fallback` when it is absent or null (Hugging Face's class default).
template <class T>
T field(const json& j, const char* key, T fallback, const std::string& path) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  try {
    return j[key].get<T>();
  } catch (const json::exception&) {
    throw std::runtime_error("config '" + path + "': " + key + " is " + j[key].dump() + ", of the wrong type");
  }
}

RopeScaling rope_scaling(const json& j, const std::string& path) {
  if (!j.contains("rope_scaling") || j["rope_scaling"].is_null()) return RopeScaling();
  const json& r = j["rope_scaling"];
  const std::string type = r.contains("rope_type") ? field<std::string>(r, "rope_type", "default", path)
                                                   : field<std::string>(r, "type", "default", path);
  if (type != "default" && type != "linear" && type != "llama3") {
    throw std::runtime_error("config '" + path + "': rope_scaling type '" + type +
                             "' is not supported (default, linear and llama3 are)");
  }
  RopeScaling s;
  s.rope_type(type)
      .factor(field<double>(r, "factor", 1.0, path))
      .low_freq_factor(field<double>(r, "low_freq_factor", 1.0, path))
      .high_freq_factor(field<double>(r, "high_freq_factor", 4.0, path))
      .original_max_position_embeddings(field<int64_t>(r, "original_max_position_embeddings", 8192, path));
  return s;
}

json config_json(const LlamaConfig& c, at::ScalarType dtype) {
  const bool qwen = c.qkv_bias() && !c.attention_bias();
  json j = {{"architectures", {qwen ? "Qwen2ForCausalLM" : "LlamaForCausalLM"}},
            {"model_type", qwen ? "qwen2" : "llama"},
            {"hidden_act", "silu"},
            {"torch_dtype", dtype == at::kBFloat16 ? "bfloat16"
                            : dtype == at::kHalf   ? "float16"
                                                   : "float32"}};
  LlamaConfig copy = c;
  LlamaConfig::for_each_field(copy, [&](const char* name, const auto& value, const char*) { j[name] = value; });
  j.erase("qkv_bias");
  j["num_key_value_heads"] = c.kv_heads();
  j["head_dim"] = c.dim_per_head();
  const RopeScaling& r = c.rope_scaling();
  if (r.rope_type() == "default") {
    j["rope_scaling"] = nullptr;
  } else {
    j["rope_scaling"] = {{"rope_type", r.rope_type()}, {"factor", r.factor()}};
    if (r.rope_type() == "llama3") {
      j["rope_scaling"]["low_freq_factor"] = r.low_freq_factor();
      j["rope_scaling"]["high_freq_factor"] = r.high_freq_factor();
      j["rope_scaling"]["original_max_position_embeddings"] = r.original_max_position_embeddings();
    }
  }
  if (qwen) j["use_sliding_window"] = false;
  return j;
}

// The shard files of `dir`: model.safetensors, or those model.safetensors.index.json names.
std::vector<std::string> shard_files(const std::string& dir) {
  const fs::path single = fs::path(dir) / "model.safetensors";
  const fs::path index = fs::path(dir) / "model.safetensors.index.json";
  if (fs::exists(single)) return {single.string()};
  if (!fs::exists(index)) {
    throw std::runtime_error("model directory '" + dir +
                             "' has neither model.safetensors nor model.safetensors.index.json");
  }
  const json j = read_json(index.string(), "safetensors index");
  if (!j.contains("weight_map") || !j["weight_map"].is_object())
    throw std::runtime_error("safetensors index '" + index.string() + "' has no weight_map object");
  std::set<std::string> files;
  for (const auto& item : j["weight_map"].items()) files.insert(item.value().get<std::string>());
  std::vector<std::string> out;
  for (const auto& f : files) out.push_back((fs::path(dir) / f).string());
  return out;
}

}  // namespace

LlamaConfig read_llama_config(const std::string& path) {
  const json j = read_json(path, "config");
  const std::string type = field<std::string>(j, "model_type", "", path);
  if (type != "llama" && type != "mistral" && type != "qwen2") {
    throw std::runtime_error("config '" + path + "': model_type is '" + type +
                             "', expected llama, mistral or qwen2 (the Llama family models::Llama computes)");
  }
  if (field<std::string>(j, "hidden_act", "silu", path) != "silu")
    throw std::runtime_error("config '" + path + "': hidden_act is " + j["hidden_act"].dump() + ", expected silu");
  if (field<bool>(j, "use_sliding_window", false, path))
    throw std::runtime_error("config '" + path +
                             "': use_sliding_window is true; sliding-window attention is not supported");
  LlamaConfig c;
  LlamaConfig::for_each_field(c, [&](const char* name, auto& value, const char*) {
    value = field<std::decay_t<decltype(value)>>(j, name, value, path);
  });
  c.rope_scaling(rope_scaling(j, path));
  if (type == "qwen2") c.qkv_bias(true);
  try {
    c.validate();
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error("config '" + path + "': " + e.what());
  }
  return c;
}

std::shared_ptr<Llama> load_llama_hf(const std::string& dir, at::ScalarType dtype) {
  const LlamaConfig config = read_llama_config((fs::path(dir) / "config.json").string());
  auto model = std::make_shared<Llama>(config);
  detail::NamedWeights weights(*model, "model directory '" + dir + "'");
  for (const auto& file : shard_files(dir)) {
    for (const auto& [name, tensor] : read_safetensors(file)) {
      if (name.find("rotary_emb.inv_freq") != std::string::npos) continue;     // older checkpoints keep the buffer
      if (name == "lm_head.weight" && config.tie_word_embeddings()) continue;  // tied: the embedding is the head
      weights.fill(name, tensor);
    }
  }
  weights.require_all();
  if (dtype != at::kFloat) model->to(dtype);
  return model;
}

void save_llama_hf(Llama& model, const std::string& dir, const SavePretrainedOptions& options) {
  if (!at::isFloatingType(options.dtype()))
    throw std::invalid_argument("SavePretrainedOptions.dtype must be a floating type");
  if (options.max_shard_bytes() <= 0) throw std::invalid_argument("SavePretrainedOptions.max_shard_bytes must be > 0");
  fs::create_directories(dir);
  std::vector<NamedTensors> shards(1);
  int64_t shard_bytes = 0, total = 0;
  for (const auto& p : model.named_parameters()) {
    at::Tensor t = p.value().detach().to(at::kCPU, options.dtype()).contiguous();
    const int64_t bytes = static_cast<int64_t>(t.nbytes());
    if (shard_bytes > 0 && shard_bytes + bytes > options.max_shard_bytes()) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().emplace_back(p.key(), t);
    shard_bytes += bytes;
    total += bytes;
  }
  const std::map<std::string, std::string> metadata{{"format", "pt"}};
  fs::remove(fs::path(dir) / "model.safetensors");
  fs::remove(fs::path(dir) / "model.safetensors.index.json");
  if (shards.size() == 1) {
    write_safetensors((fs::path(dir) / "model.safetensors").string(), shards[0], metadata);
  } else {
    json index = {{"metadata", {{"total_size", total}}}, {"weight_map", json::object()}};
    for (size_t i = 0; i < shards.size(); ++i) {
      char name[64];
      std::snprintf(name, sizeof(name), "model-%05zu-of-%05zu.safetensors", i + 1, shards.size());
      write_safetensors((fs::path(dir) / name).string(), shards[i], metadata);
      for (const auto& [tensor_name, t] : shards[i]) index["weight_map"][tensor_name] = name;
    }
    composer::detail::write_json_atomically((fs::path(dir) / "model.safetensors.index.json").string(), index);
  }
  composer::detail::write_json_atomically((fs::path(dir) / "config.json").string(),
                                          config_json(model.config(), options.dtype()));
}

}  // namespace composer::models
