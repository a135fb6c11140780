// Hugging Face model directories in and out for the Llama family (model_type llama, mistral, qwen2): config.json
// plus model.safetensors or sharded safetensors (model.safetensors.index.json), the layout save_pretrained writes and
// from_pretrained reads. Tensor names are Hugging Face's on both sides (models::Llama uses them), a tied head has no
// lm_head.weight, and weights of any floating dtype are converted to the one asked for.
#pragma once

#include "composer/models/llama.h"

#include <ATen/core/ScalarType.h>

#include <cstdint>
#include <memory>
#include <string>

namespace composer::models {

/// The LlamaConfig of a config.json. Throws std::runtime_error naming the file and the key: a model_type other than
/// llama, mistral or qwen2, a missing size, a sliding window (Mistral) or rope_scaling this model does not have.
LlamaConfig read_llama_config(const std::string& config_json);

/// The model in `dir` (config.json and model.safetensors or model.safetensors.index.json) in `dtype`. Throws
/// std::runtime_error naming the directory and the tensor when one is missing, extra or of another shape.
std::shared_ptr<Llama> load_llama_hf(const std::string& dir, at::ScalarType dtype = at::kFloat);

struct SavePretrainedOptions {
  /// Dtype of the written weights (config.json's torch_dtype); floating types only.
  TORCH_ARG(at::ScalarType, dtype) = at::kFloat;
  /// Largest shard in bytes (save_pretrained's max_shard_size, "5GB"); a model above it is written as
  /// model-00001-of-0000N.safetensors files with model.safetensors.index.json.
  TORCH_ARG(int64_t, max_shard_bytes) = 5'000'000'000;

 public:
  /// The keys a config sets (repr, hyperparameter logging, read_options).
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("dtype", self.dtype_, "dtype of the written weights (config.json's torch_dtype)");
    visit("max_shard_bytes", self.max_shard_bytes_,
          "largest safetensors shard in bytes (save_pretrained's max_shard_size)");
  }
};

/// Writes config.json (model_type llama, or qwen2 for a model with qkv_bias) and the weights into `dir` (created;
/// files already there are replaced), so that transformers' AutoModelForCausalLM.from_pretrained(dir) loads them.
void save_llama_hf(Llama& model, const std::string& dir, const SavePretrainedOptions& options = {});

}  // namespace composer::models
