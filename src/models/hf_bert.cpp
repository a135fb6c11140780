#include "composer/models/hf_bert.h"

#include "composer/formats/safetensors.h"
#include "models/detail/hf_files.h"
#include "models/detail/named_weights.h"
#include "utils/detail/text_file.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <set>
#include <stdexcept>

namespace composer::models {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr double kBertLayerNormEps = 1e-12;  // BertMLM's LayerNorms
constexpr const char* kTokenTypes = "embeddings.token_type_embeddings.weight";

// One of BertMLM's parameters and the Hugging Face tensors it is made of (several: concatenated along rows).
struct Piece {
  std::string ours;
  std::vector<std::string> theirs;
};

// The one name table, in BertForMaskedLM's names without their "bert." prefix.
std::vector<Piece> name_table(int64_t layers) {
  std::vector<Piece> table{{"word_embeddings.weight", {"embeddings.word_embeddings.weight"}},
                           {"position_embeddings.weight", {"embeddings.position_embeddings.weight"}},
                           {"embeddings_ln.weight", {"embeddings.LayerNorm.weight"}},
                           {"embeddings_ln.bias", {"embeddings.LayerNorm.bias"}}};
  for (int64_t i = 0; i < layers; ++i) {
    const std::string p = "layers." + std::to_string(i) + ".", h = "encoder.layer." + std::to_string(i) + ".";
    for (const std::string wb : {"weight", "bias"}) {
      const std::string self = h + "attention.self.";
      table.push_back({p + "attention.c_attn." + wb, {self + "query." + wb, self + "key." + wb, self + "value." + wb}});
      table.push_back({p + "attention.c_proj." + wb, {h + "attention.output.dense." + wb}});
      table.push_back({p + "ln_1." + wb, {h + "attention.output.LayerNorm." + wb}});
      table.push_back({p + "ffn.intermediate." + wb, {h + "intermediate.dense." + wb}});
      table.push_back({p + "ffn.output." + wb, {h + "output.dense." + wb}});
      table.push_back({p + "ln_2." + wb, {h + "output.LayerNorm." + wb}});
    }
  }
  for (const std::string wb : {"weight", "bias"}) {
    table.push_back({"head.dense." + wb, {"cls.predictions.transform.dense." + wb}});
    table.push_back({"head.ln." + wb, {"cls.predictions.transform.LayerNorm." + wb}});
  }
  table.push_back({"decoder_bias", {"cls.predictions.bias"}});
  return table;
}

// The name in a BertForMaskedLM file: the encoder under "bert.", the head under "cls.".
std::string stored_name(const std::string& key) { return key.rfind("cls.", 0) == 0 ? key : "bert." + key; }

// Tensors a masked LM does not use: the pooler and the next-sentence head (BertModel, BertForPreTraining), the tied
// decoder (the word embeddings and cls.predictions.bias), and the position_ids buffer of older checkpoints.
bool not_a_masked_lm_part(const std::string& key) {
  return key.rfind("pooler.", 0) == 0 || key.rfind("cls.seq_relationship.", 0) == 0 ||
         key == "cls.predictions.decoder.weight" || key == "cls.predictions.decoder.bias" ||
         key == "embeddings.position_ids";
}

json bert_config_json(const TransformerConfig& c, at::ScalarType dtype) {
  return {{"architectures", {"BertForMaskedLM"}},
          {"model_type", "bert"},
          {"vocab_size", c.vocab_size()},
          {"hidden_size", c.d_model()},
          {"num_hidden_layers", c.n_layer()},
          {"num_attention_heads", c.n_head()},
          {"intermediate_size", c.ff()},
          {"hidden_act", "gelu"},
          {"hidden_dropout_prob", c.dropout()},
          {"attention_probs_dropout_prob", 0.0},
          {"max_position_embeddings", c.max_seq_len()},
          {"type_vocab_size", 2},
          {"layer_norm_eps", kBertLayerNormEps},
          {"position_embedding_type", "absolute"},
          {"pad_token_id", 0},
          {"tie_word_embeddings", true},
          {"torch_dtype", detail::torch_dtype_name(dtype)}};
}

}  // namespace

TransformerConfig read_bert_config(const std::string& path) {
  const json j = detail::read_json(path, "config");
  const auto field = [&](const char* key, auto fallback) { return detail::config_field(j, key, fallback, path); };
  const std::string type = field("model_type", std::string());
  detail::require_config(type == "bert", path, "model_type is '" + type + "', expected bert");
  const std::string act = field("hidden_act", std::string("gelu"));
  detail::require_config(act == "gelu", path, "hidden_act is '" + act + "'; BertMLM computes the exact gelu");
  const std::string positions = field("position_embedding_type", std::string("absolute"));
  detail::require_config(positions == "absolute", path,
                         "position_embedding_type is '" + positions + "', expected absolute");
  const double eps = field("layer_norm_eps", kBertLayerNormEps);
  detail::require_config(eps == kBertLayerNormEps, path,
                         "layer_norm_eps is " + j["layer_norm_eps"].dump() + "; BertMLM's is 1e-12");
  detail::require_config(field("tie_word_embeddings", true), path,
                         "tie_word_embeddings is false; BertMLM ties its decoder");
  detail::require_config(!field("is_decoder", false) && !field("add_cross_attention", false), path,
                         "is_decoder/add_cross_attention: BertMLM is an encoder");
  TransformerConfig c;
  c.vocab_size(field("vocab_size", int64_t{30522}))
      .max_seq_len(field("max_position_embeddings", int64_t{512}))
      .d_model(field("hidden_size", int64_t{768}))
      .n_layer(field("num_hidden_layers", int64_t{12}))
      .n_head(field("num_attention_heads", int64_t{12}))
      .d_ff(field("intermediate_size", int64_t{3072}))
      .dropout(field("hidden_dropout_prob", 0.1));
  return detail::validated(c, path);
}

std::shared_ptr<BertMLM> load_bert_hf(const std::string& dir, at::ScalarType dtype) {
  auto model = std::make_shared<BertMLM>(read_bert_config((fs::path(dir) / "config.json").string()));
  const std::string source = "model directory '" + dir + "'";
  std::map<std::string, at::Tensor> stored;  // by name without "bert."
  for (const auto& file : detail::shard_files(dir))
    for (const auto& [name, tensor] : read_safetensors(file))
      stored[name.rfind("bert.", 0) == 0 ? name.substr(5) : name] = tensor;
  if (!stored.count("cls.predictions.bias") && stored.count("cls.predictions.decoder.bias"))
    stored["cls.predictions.bias"] = stored["cls.predictions.decoder.bias"];
  std::set<std::string> used{kTokenTypes};
  const auto take = [&](const std::string& key) {
    const auto it = stored.find(key);
    if (it == stored.end()) throw std::runtime_error(source + " lacks tensor '" + stored_name(key) + "'");
    used.insert(key);
    return it->second.to(at::kFloat);
  };
  detail::NamedWeights weights(*model, source);
  for (const auto& piece : name_table(model->config().n_layer())) {
    std::vector<at::Tensor> parts;
    for (const auto& key : piece.theirs) parts.push_back(take(key));
    at::Tensor value = parts.size() == 1 ? parts[0] : at::cat(parts, 0);
    if (piece.ours == "position_embeddings.weight" && stored.count(kTokenTypes))
      value = value + stored[kTokenTypes].to(at::kFloat)[0];  // token type 0, folded
    weights.fill(piece.ours, value, stored_name(piece.theirs[0]));
  }
  for (const auto& [key, tensor] : stored)
    if (!used.count(key) && !not_a_masked_lm_part(key))
      throw std::runtime_error(source + ": tensor '" + stored_name(key) + "' is not part of a BERT masked LM");
  weights.require_all();
  if (dtype != at::kFloat) model->to(dtype);
  return model;
}

void save_bert_hf(BertMLM& model, const std::string& dir, const SavePretrainedOptions& options) {
  detail::check_save_options(options);
  const auto params = model.named_parameters();
  const auto out = [&](const at::Tensor& t) { return t.detach().to(at::kCPU, options.dtype()).contiguous(); };
  NamedTensors tensors;
  for (const auto& piece : name_table(model.config().n_layer())) {
    const at::Tensor& p = params[piece.ours];
    const auto parts = p.chunk(static_cast<int64_t>(piece.theirs.size()), 0);
    for (size_t i = 0; i < parts.size(); ++i) tensors.emplace_back(stored_name(piece.theirs[i]), out(parts[i]));
    if (piece.ours == "position_embeddings.weight")  // the folded token types: the positions hold type 0's row
      tensors.emplace_back(stored_name(kTokenTypes), out(at::zeros({2, p.size(1)}, p.options())));
  }
  detail::write_pretrained_weights(dir, tensors, options.max_shard_bytes());
  composer::detail::write_json_atomically((fs::path(dir) / "config.json").string(),
                                          bert_config_json(model.config(), options.dtype()));
}

}  // namespace composer::models
