// Hugging Face GPT-2 directories in and out (model_type gpt2, GPT2LMHeadModel): config.json plus model.safetensors
// or sharded safetensors, as save_pretrained writes them and from_pretrained reads them. Hugging Face keeps GPT-2's
// projections as Conv1D layers, whose weights are [in, out]: they are transposed into models::GPT's Linear layers and
// back. The head is tied to the token embedding (tie_word_embeddings), as in GPT-2.
#pragma once

#include "composer/models/hf_model.h"
#include "composer/models/transformer.h"

#include <ATen/core/ScalarType.h>

#include <memory>
#include <string>

namespace composer::models {

/// The model_type of a Hugging Face model directory's config.json ("llama", "gpt2", ...); std::runtime_error naming
/// the file when it is missing or has none.
std::string hf_model_type(const std::string& dir);

/// The TransformerConfig of a GPT-2 config.json. Throws std::runtime_error naming the file and the key: a model_type
/// other than gpt2, an activation other than gelu/gelu_new/gelu_pytorch_tanh, an untied head, or attention scaling
/// models::GPT does not compute (scale_attn_weights false, scale_attn_by_inverse_layer_idx true).
TransformerConfig read_gpt2_config(const std::string& config_json);

/// The GPT-2 in `dir` in `dtype`; errors name the directory and the tensor that is missing, extra or misshapen.
std::shared_ptr<GPT> load_gpt2_hf(const std::string& dir, at::ScalarType dtype = at::kFloat);

/// Writes config.json (GPT2LMHeadModel) and the weights into `dir`, so that
/// transformers.AutoModelForCausalLM.from_pretrained(dir) loads the same model. dropout becomes resid_pdrop and
/// embd_pdrop (attn_pdrop 0: models::GPT has no attention dropout).
void save_gpt2_hf(GPT& model, const std::string& dir, const SavePretrainedOptions& options = {});

}  // namespace composer::models
