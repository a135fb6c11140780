#include "composer/models/gguf_model.h"

#include "composer/formats/gguf.h"
#include "models/detail/named_weights.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <map>
#include <stdexcept>

namespace composer::models {
namespace {

[[noreturn]] void fail(const formats::GgufFile& f, const std::string& message) {
  throw std::runtime_error("GGUF file '" + f.path() + "': " + message);
}

// The Hugging Face name of a GGUF tensor of a llama/qwen2 file, or "" when it is not one.
std::string hf_name(const std::string& gguf) {
  static const std::map<std::string, std::string> top = {{"token_embd.weight", "model.embed_tokens.weight"},
                                                         {"output_norm.weight", "model.norm.weight"},
                                                         {"output.weight", "lm_head.weight"}};
  static const std::map<std::string, std::string> block = {
      {"attn_norm.weight", "input_layernorm.weight"}, {"ffn_norm.weight", "post_attention_layernorm.weight"},
      {"attn_q.weight", "self_attn.q_proj.weight"},   {"attn_k.weight", "self_attn.k_proj.weight"},
      {"attn_v.weight", "self_attn.v_proj.weight"},   {"attn_output.weight", "self_attn.o_proj.weight"},
      {"attn_q.bias", "self_attn.q_proj.bias"},       {"attn_k.bias", "self_attn.k_proj.bias"},
      {"attn_v.bias", "self_attn.v_proj.bias"},       {"attn_output.bias", "self_attn.o_proj.bias"},
      {"ffn_gate.weight", "mlp.gate_proj.weight"},    {"ffn_up.weight", "mlp.up_proj.weight"},
      {"ffn_down.weight", "mlp.down_proj.weight"}};
  if (auto it = top.find(gguf); it != top.end()) return it->second;
  if (gguf.rfind("blk.", 0) != 0) return "";
  const size_t dot = gguf.find('.', 4);
  if (dot == std::string::npos) return "";
  const std::string index = gguf.substr(4, dot - 4);
  if (index.empty() || index.find_first_not_of("0123456789") != std::string::npos) return "";
  auto it = block.find(gguf.substr(dot + 1));
  return it == block.end() ? "" : "model.layers." + index + "." + it->second;
}

// Elements [offset, offset + numel) of a query or key tensor with its rows unpermuted (unpermute_rotary_rows), read
// row by row from the rows of the file that hold them: a sharded load dequantizes only its part.
at::Tensor read_unpermuted_part(const formats::GgufFile& f, const std::string& tensor, int64_t heads, int64_t offset,
                                int64_t numel) {
  const auto& shape = f.info(tensor).shape;
  const int64_t half = shape.at(0) / heads / 2;
  int64_t row = 1;  // elements per row
  for (size_t d = 1; d < shape.size(); ++d) row *= shape[d];
  std::vector<at::Tensor> pieces;
  for (int64_t pos = offset; pos < offset + numel;) {
    const int64_t r = pos / row, begin = pos - r * row, end = std::min(row, offset + numel - r * row);
    const int64_t within =
        r % (2 * half);  // row r of head r / (2 half) is stored at (within % half) * 2 + within / half
    const int64_t stored = r - within + (within % half) * 2 + within / half;
    pieces.push_back(f.read_part(tensor, stored * row + begin, end - begin));
    pos += end - begin;
  }
  return pieces.empty() ? at::empty({0}, at::kFloat) : at::cat(pieces);
}

int64_t required_int(const formats::GgufFile& f, const std::string& key) {
  if (!f.has(key)) fail(f, "has no metadata key '" + key + "' (a llama-family model needs it)");
  return f.get_int(key);
}

}  // namespace

at::Tensor unpermute_rotary_rows(const at::Tensor& w, int64_t n_head) {
  const int64_t dim = w.size(0) / n_head / 2;
  std::vector<int64_t> shape{n_head, dim, 2};
  for (int64_t d = 1; d < w.dim(); ++d) shape.push_back(w.size(d));
  return w.reshape(shape).transpose(1, 2).reshape(w.sizes());
}

LlamaConfig llama_config_from_gguf(const formats::GgufFile& f) {
  if (!f.has("general.architecture")) fail(f, "has no general.architecture");
  const std::string arch = f.get_string("general.architecture");
  if (arch != "llama" && arch != "qwen2") {
    fail(f, "general.architecture is '" + arch + "', expected llama or qwen2 (the llama-family models read here)");
  }
  const std::string p = arch + ".";
  LlamaConfig c;
  c.hidden_size(required_int(f, p + "embedding_length"))
      .intermediate_size(required_int(f, p + "feed_forward_length"))
      .num_hidden_layers(required_int(f, p + "block_count"))
      .num_attention_heads(required_int(f, p + "attention.head_count"))
      .max_position_embeddings(f.has(p + "context_length") ? f.get_int(p + "context_length") : 2048)
      .rms_norm_eps(f.get_float(p + "attention.layer_norm_rms_epsilon"))
      .rope_theta(f.has(p + "rope.freq_base") ? f.get_float(p + "rope.freq_base") : 10000.0)
      .tie_word_embeddings(!f.has_tensor("output.weight"))
      .qkv_bias(f.has_tensor("blk.0.attn_q.bias"));
  if (f.has(p + "attention.head_count_kv")) c.num_key_value_heads(f.get_int(p + "attention.head_count_kv"));
  if (f.has(p + "attention.key_length")) c.head_dim(f.get_int(p + "attention.key_length"));
  c.vocab_size(f.has(p + "vocab_size") ? f.get_int(p + "vocab_size") : f.info("token_embd.weight").shape.at(0));
  if (f.has(p + "rope.scaling.type")) {
    const std::string type = f.get_string(p + "rope.scaling.type");
    if (type == "linear") {
      c.rope_scaling(RopeScaling().rope_type("linear").factor(f.get_float(p + "rope.scaling.factor")));
    } else if (type != "none") {
      fail(f, p + "rope.scaling.type is '" + type + "', expected none or linear");
    }
  }
  if (f.has_tensor("rope_freqs.weight")) {
    fail(f, "has rope_freqs.weight (Llama 3.1's per-frequency rope factors), which this loader does not apply");
  }
  try {
    c.validate();
  } catch (const std::invalid_argument& e) {
    fail(f, e.what());
  }
  return c;
}

std::shared_ptr<Llama> load_llama_gguf(const std::string& path, at::ScalarType dtype) {
  const auto file = std::make_shared<const formats::GgufFile>(path);  // mapped: read as the tensors are
  const formats::GgufFile& f = *file;
  const LlamaConfig config = llama_config_from_gguf(f);
  const bool permuted = f.get_string("general.architecture") == "llama";
  auto model = std::make_shared<Llama>(config);
  detail::NamedWeights weights(*model, "GGUF file '" + path + "'");
  for (const auto& t : f.tensors()) {
    const std::string name = hf_name(t.name);
    if (name.empty())
      fail(f, "tensor '" + t.name + "' is not a tensor of this " + std::to_string(config.num_hidden_layers()) +
                  "-layer llama model");
    const int64_t heads = !permuted                                      ? 0
                          : t.name.find(".attn_q.") != std::string::npos ? config.num_attention_heads()
                          : t.name.find(".attn_k.") != std::string::npos ? config.kv_heads()
                                                                         : 0;
    weights.fill_from(
        name, t.shape,
        [file, tensor = t.name, heads](int64_t offset, int64_t numel) {
          return heads > 0 ? read_unpermuted_part(*file, tensor, heads, offset, numel)
                           : file->read_part(tensor, offset, numel);
        },
        t.name);
  }
  weights.require_all();
  detail::convert_loaded(*model, dtype, "load_llama_gguf");
  return model;
}

}  // namespace composer::models
