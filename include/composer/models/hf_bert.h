// Hugging Face BERT directories in and out (model_type bert, BertForMaskedLM): config.json plus model.safetensors or
// sharded safetensors. Names map through one table: query, key and value are models::BertMLM's fused c_attn (rows
// q, k, v), the MLM head's transform is its `head`, the decoder is tied to the word embeddings. BertMLM has no
// token-type embeddings: token type 0's row is folded into the position embeddings on the way in (exact for the
// single-segment inputs of masked-LM training, token_type_ids all 0) and written back as zeros with the folded
// positions. The pooler and the next-sentence head (BertForPreTraining, BertModel) are not part of a masked LM and
// are skipped, as transformers skips them.
#pragma once

#include "composer/models/hf_model.h"
#include "composer/models/transformer.h"

#include <ATen/core/ScalarType.h>

#include <memory>
#include <string>

namespace composer::models {

/// The TransformerConfig of a BERT config.json. Throws std::runtime_error naming the file and the key: a model_type
/// other than bert, a hidden_act other than gelu, a position_embedding_type other than absolute, a layer_norm_eps
/// other than 1e-12 (BertMLM's), an untied head, or a decoder (is_decoder, add_cross_attention).
TransformerConfig read_bert_config(const std::string& config_json);

/// The BERT masked LM in `dir` in `dtype`; errors name the directory and the tensor that is missing, unknown or
/// misshapen.
std::shared_ptr<BertMLM> load_bert_hf(const std::string& dir, at::ScalarType dtype = at::kFloat);

/// Writes config.json (BertForMaskedLM) and the weights into `dir`, so that
/// transformers.AutoModelForMaskedLM.from_pretrained(dir) loads the same model. dropout becomes hidden_dropout_prob
/// (attention_probs_dropout_prob 0: BertMLM drops the attention's output, not its probabilities).
void save_bert_hf(BertMLM& model, const std::string& dir, const SavePretrainedOptions& options = {});

}  // namespace composer::models
