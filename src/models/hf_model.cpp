#include "composer/models/hf_model.h"

#include "composer/formats/safetensors.h"
#include "models/detail/hf_files.h"
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

RopeScaling rope_scaling(const json& j, const std::string& path) {
  if (!j.contains("rope_scaling") || j["rope_scaling"].is_null()) return RopeScaling();
  const json& r = j["rope_scaling"];
  const std::string type = r.contains("rope_type") ? detail::config_field<std::string>(r, "rope_type", "default", path)
                                                   : detail::config_field<std::string>(r, "type", "default", path);
  if (type != "default" && type != "linear" && type != "llama3") {
    throw std::runtime_error("config '" + path + "': rope_scaling type '" + type +
                             "' is not supported (default, linear and llama3 are)");
  }
  RopeScaling s;
  s.rope_type(type)
      .factor(detail::config_field<double>(r, "factor", 1.0, path))
      .low_freq_factor(detail::config_field<double>(r, "low_freq_factor", 1.0, path))
      .high_freq_factor(detail::config_field<double>(r, "high_freq_factor", 4.0, path))
      .original_max_position_embeddings(
          detail::config_field<int64_t>(r, "original_max_position_embeddings", 8192, path));
  return s;
}

json config_json(const LlamaConfig& c, at::ScalarType dtype) {
  const bool qwen = c.qkv_bias() && !c.attention_bias();
  json j = {{"architectures", {qwen ? "Qwen2ForCausalLM" : "LlamaForCausalLM"}},
            {"model_type", qwen ? "qwen2" : "llama"},
            {"hidden_act", "silu"},
            {"torch_dtype", detail::torch_dtype_name(dtype)}};
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

}  // namespace

LlamaConfig read_llama_config(const std::string& path) {
  const json j = detail::read_json(path, "config");
  const std::string type = detail::config_field<std::string>(j, "model_type", "", path);
  if (type != "llama" && type != "mistral" && type != "qwen2") {
    throw std::runtime_error("config '" + path + "': model_type is '" + type +
                             "', expected llama, mistral or qwen2 (the Llama family models::Llama computes)");
  }
  if (detail::config_field<std::string>(j, "hidden_act", "silu", path) != "silu")
    throw std::runtime_error("config '" + path + "': hidden_act is " + j["hidden_act"].dump() + ", expected silu");
  if (detail::config_field<bool>(j, "use_sliding_window", false, path))
    throw std::runtime_error("config '" + path +
                             "': use_sliding_window is true; sliding-window attention is not supported");
  LlamaConfig c;
  LlamaConfig::for_each_field(c, [&](const char* name, auto& value, const char*) {
    value = detail::config_field<std::decay_t<decltype(value)>>(j, name, value, path);
  });
  c.rope_scaling(rope_scaling(j, path));
  if (type == "qwen2") c.qkv_bias(true);
  return detail::validated(c, path);
}

std::shared_ptr<Llama> load_llama_hf(const std::string& dir, at::ScalarType dtype) {
  const LlamaConfig config = read_llama_config((fs::path(dir) / "config.json").string());
  auto model = std::make_shared<Llama>(config);
  detail::NamedWeights weights(*model, "model directory '" + dir + "'");
  for (const auto& path : detail::shard_files(dir)) {
    // A tensor at a time; under nn::DeferredInit only when the model is materialized (FSDP: each rank its part).
    const auto file = std::make_shared<const SafetensorsFile>(path);
    for (const auto& name : file->names()) {
      if (name.find("rotary_emb.inv_freq") != std::string::npos) continue;     // older checkpoints keep the buffer
      if (name == "lm_head.weight" && config.tie_word_embeddings()) continue;  // tied: the embedding is the head
      weights.fill_from(name, file->shape(name),
                        [file, name](int64_t offset, int64_t numel) { return file->read_part(name, offset, numel); });
    }
  }
  weights.require_all();
  detail::convert_loaded(*model, dtype, "load_llama_hf");
  return model;
}

void save_llama_hf(Llama& model, const std::string& dir, const SavePretrainedOptions& options) {
  detail::check_save_options(options);
  NamedTensors tensors;
  for (const auto& p : model.named_parameters())
    tensors.emplace_back(p.key(), p.value().detach().to(at::kCPU, options.dtype()).contiguous());
  detail::write_pretrained_weights(dir, tensors, options.max_shard_bytes());
  composer::detail::write_json_atomically((fs::path(dir) / "config.json").string(),
                                          config_json(model.config(), options.dtype()));
}

}  // namespace composer::models
