#include "composer/models/hf_gpt2.h"

#include "composer/formats/safetensors.h"
#include "models/detail/hf_files.h"
#include "models/detail/named_weights.h"
#include "utils/detail/text_file.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <stdexcept>

namespace composer::models {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Hugging Face's Conv1D weights: the attention and MLP projections inside the blocks.
bool is_conv1d_weight(const std::string& name, const at::Tensor& t) {
  const auto ends_with = [&](const char* suffix) {
    const std::string s(suffix);
    return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
  };
  return t.dim() == 2 && name.rfind("h.", 0) == 0 &&
         (ends_with("c_attn.weight") || ends_with("c_proj.weight") || ends_with("c_fc.weight"));
}

json config_json(const TransformerConfig& c, at::ScalarType dtype) {
  return {{"architectures", {"GPT2LMHeadModel"}},
          {"model_type", "gpt2"},
          {"vocab_size", c.vocab_size()},
          {"n_positions", c.max_seq_len()},
          {"n_embd", c.d_model()},
          {"n_layer", c.n_layer()},
          {"n_head", c.n_head()},
          {"n_inner", c.d_ff() > 0 ? json(c.d_ff()) : json(nullptr)},
          {"activation_function", c.activation() == "gelu" ? "gelu" : "gelu_new"},
          {"layer_norm_epsilon", c.layer_norm_eps()},
          {"resid_pdrop", c.dropout()},
          {"embd_pdrop", c.dropout()},
          {"attn_pdrop", 0.0},
          {"scale_attn_weights", true},
          {"tie_word_embeddings", true},
          {"torch_dtype", detail::torch_dtype_name(dtype)}};
}

}  // namespace

std::string hf_model_type(const std::string& dir) {
  const std::string path = (fs::path(dir) / "config.json").string();
  const json j = detail::read_json(path, "config");
  const std::string type = detail::config_field<std::string>(j, "model_type", "", path);
  if (type.empty()) throw std::runtime_error("config '" + path + "' has no model_type");
  return type;
}

TransformerConfig read_gpt2_config(const std::string& path) {
  const json j = detail::read_json(path, "config");
  const auto field = [&](const char* key, auto fallback) { return detail::config_field(j, key, fallback, path); };
  const std::string type = field("model_type", std::string());
  detail::require_config(type == "gpt2", path, "model_type is '" + type + "', expected gpt2");
  const std::string activation = field("activation_function", std::string("gelu_new"));
  detail::require_config(activation == "gelu" || activation == "gelu_new" || activation == "gelu_pytorch_tanh", path,
                         "activation_function is '" + activation + "'; expected gelu, gelu_new or gelu_pytorch_tanh");
  detail::require_config(field("tie_word_embeddings", true), path,
                         "tie_word_embeddings is false; models::GPT ties its head");
  detail::require_config(field("scale_attn_weights", true), path,
                         "scale_attn_weights is false; models::GPT scales by 1/sqrt(d)");
  detail::require_config(!field("scale_attn_by_inverse_layer_idx", false), path,
                         "scale_attn_by_inverse_layer_idx is true; models::GPT does not scale by layer");
  TransformerConfig c;
  c.vocab_size(field("vocab_size", int64_t{50257}))
      .max_seq_len(field("n_positions", int64_t{1024}))
      .d_model(field("n_embd", int64_t{768}))
      .n_layer(field("n_layer", int64_t{12}))
      .n_head(field("n_head", int64_t{12}))
      .d_ff(field("n_inner", int64_t{0}))
      .dropout(field("resid_pdrop", 0.1))
      .activation(activation == "gelu" ? "gelu" : "gelu_new")
      .layer_norm_eps(field("layer_norm_epsilon", 1e-5));
  return detail::validated(c, path);
}

std::shared_ptr<GPT> load_gpt2_hf(const std::string& dir, at::ScalarType dtype) {
  auto model = std::make_shared<GPT>(read_gpt2_config((fs::path(dir) / "config.json").string()));
  detail::NamedWeights weights(*model, "model directory '" + dir + "'");
  for (const auto& file : detail::shard_files(dir)) {
    for (const auto& [stored, tensor] : read_safetensors(file)) {
      // GPT2LMHeadModel's names start with "transformer." (GPT2Model's do not); the tied head and the attention
      // mask buffers of older checkpoints hold no weights of their own.
      const std::string name = stored.rfind("transformer.", 0) == 0 ? stored.substr(12) : stored;
      if (name == "lm_head.weight" || name.find(".attn.bias") != std::string::npos ||
          name.find(".attn.masked_bias") != std::string::npos)
        continue;
      weights.fill(name, is_conv1d_weight(name, tensor) ? tensor.t() : tensor, stored);
    }
  }
  weights.require_all();
  if (dtype != at::kFloat) model->to(dtype);
  return model;
}

void save_gpt2_hf(GPT& model, const std::string& dir, const SavePretrainedOptions& options) {
  detail::check_save_options(options);
  NamedTensors tensors;
  for (const auto& p : model.named_parameters()) {
    const at::Tensor t = is_conv1d_weight(p.key(), p.value()) ? p.value().t() : p.value();
    tensors.emplace_back("transformer." + p.key(), t.detach().to(at::kCPU, options.dtype()).contiguous());
  }
  detail::write_pretrained_weights(dir, tensors, options.max_shard_bytes());
  composer::detail::write_json_atomically((fs::path(dir) / "config.json").string(),
                                          config_json(model.config(), options.dtype()));
}

}  // namespace composer::models
