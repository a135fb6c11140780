// The Llama-family decoder (Llama 2/3, Mistral, Qwen2 with attention_bias, SmolLM): RMSNorm, rotary embeddings,
// grouped-query attention through SDPA, a SwiGLU MLP, an optionally tied head, and a key-value cache for generation.
// Parameter names are Hugging Face's LlamaForCausalLM's (model.layers.N.self_attn.q_proj.weight, lm_head.weight), so
// its state_dict maps one to one; every parent is a Composite, so model surgery works on it as on the other models.
#pragma once

#include "composer/models/kv_cache.h"
#include "composer/models/rotary.h"
#include "composer/nn/layer.h"
#include "composer/nn/tensor_parallel_plan.h"

#include <torch/arg.h>

#include <memory>

namespace composer::models {

/// Hugging Face's LlamaConfig: the same names and defaults (0 for num_key_value_heads and head_dim: their None).
struct LlamaConfig {
  TORCH_ARG(int64_t, vocab_size) = 32000;
  TORCH_ARG(int64_t, hidden_size) = 4096;
  TORCH_ARG(int64_t, intermediate_size) = 11008;
  TORCH_ARG(int64_t, num_hidden_layers) = 32;
  TORCH_ARG(int64_t, num_attention_heads) = 32;
  /// Key-value heads for grouped-query attention; 0: as many as query heads.
  TORCH_ARG(int64_t, num_key_value_heads) = 0;
  /// Width of a head; 0: hidden_size / num_attention_heads.
  TORCH_ARG(int64_t, head_dim) = 0;
  TORCH_ARG(int64_t, max_position_embeddings) = 2048;
  TORCH_ARG(double, rms_norm_eps) = 1e-6;
  TORCH_ARG(double, rope_theta) = 10000.0;
  TORCH_ARG(RopeScaling, rope_scaling) = RopeScaling();
  TORCH_ARG(bool, tie_word_embeddings) = false;
  /// Biases on q, k, v and o projections (Qwen2 has them on q, k and v: see qkv_bias).
  TORCH_ARG(bool, attention_bias) = false;
  /// Qwen2: biases on q, k, v only.
  TORCH_ARG(bool, qkv_bias) = false;
  TORCH_ARG(bool, mlp_bias) = false;
  TORCH_ARG(double, attention_dropout) = 0.0;
  /// Standard deviation of the normal initialisation of linear and embedding weights.
  TORCH_ARG(double, initializer_range) = 0.02;

 public:
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("vocab_size", self.vocab_size_, "tokens in the vocabulary");
    visit("hidden_size", self.hidden_size_, "model width");
    visit("intermediate_size", self.intermediate_size_, "SwiGLU MLP width");
    visit("num_hidden_layers", self.num_hidden_layers_, "decoder layers");
    visit("num_attention_heads", self.num_attention_heads_, "query heads");
    visit("num_key_value_heads", self.num_key_value_heads_, "key-value heads (0: num_attention_heads)");
    visit("head_dim", self.head_dim_, "width of a head (0: hidden_size / num_attention_heads)");
    visit("max_position_embeddings", self.max_position_embeddings_, "longest context the model was trained for");
    visit("rms_norm_eps", self.rms_norm_eps_, "RMSNorm epsilon");
    visit("rope_theta", self.rope_theta_, "rotary base");
    visit("tie_word_embeddings", self.tie_word_embeddings_, "the head shares the token embedding's weight");
    visit("attention_bias", self.attention_bias_, "biases on the q, k, v and o projections");
    visit("qkv_bias", self.qkv_bias_, "biases on the q, k and v projections only (Qwen2)");
    visit("mlp_bias", self.mlp_bias_, "biases on the MLP's projections");
    visit("attention_dropout", self.attention_dropout_, "dropout on attention probabilities");
    visit("initializer_range", self.initializer_range_, "std of the normal weight initialisation");
  }
  /// Throws std::invalid_argument naming the field (sizes <= 0, heads not dividing, ...).
  void validate() const;
  int64_t kv_heads() const { return num_key_value_heads_ > 0 ? num_key_value_heads_ : num_attention_heads_; }
  int64_t dim_per_head() const { return head_dim_ > 0 ? head_dim_ : hidden_size_ / num_attention_heads_; }
};

/// Grouped-query self-attention: q_proj, k_proj, v_proj, o_proj; rotary positions; causal.
class LlamaAttention : public nn::Composite, public nn::TensorParallelizable {
 public:
  LlamaAttention(const LlamaConfig& c, std::shared_ptr<RotaryEmbedding> rotary);
  at::Tensor forward(const at::Tensor& x) override;
  /// Attends from x's positions (after the cached ones) to the cache and x; appends x's keys and values to `layer`.
  at::Tensor forward_cached(const at::Tensor& x, LayerKVCache& layer);
  /// q_proj, k_proj, v_proj column-parallel, o_proj row-parallel, by whole heads (the degree must divide the key and
  /// value heads too).
  std::vector<nn::ParallelLayerPlan> tensor_parallel_plan() const override;

 private:
  at::Tensor attend(const at::Tensor& x, LayerKVCache* cache);
  int64_t heads_, kv_heads_, head_dim_;
  double dropout_;
  std::shared_ptr<RotaryEmbedding> rotary_;
};

/// down_proj(silu(gate_proj(x)) * up_proj(x)).
class LlamaMLP : public nn::Composite, public nn::TensorParallelizable {
 public:
  explicit LlamaMLP(const LlamaConfig& c);
  at::Tensor forward(const at::Tensor& x) override;
  /// gate_proj and up_proj column-parallel, down_proj row-parallel.
  std::vector<nn::ParallelLayerPlan> tensor_parallel_plan() const override;
};

/// x + self_attn(input_layernorm(x)), then + mlp(post_attention_layernorm(.)).
class LlamaDecoderLayer : public nn::Composite, public nn::TensorParallelizable {
 public:
  LlamaDecoderLayer(const LlamaConfig& c, std::shared_ptr<RotaryEmbedding> rotary);
  at::Tensor forward(const at::Tensor& x) override;
  at::Tensor forward_cached(const at::Tensor& x, LayerKVCache& layer);
  /// The norms on the sequence's slices under sequence parallelism.
  std::vector<nn::ParallelLayerPlan> tensor_parallel_plan() const override;
};

/// Hugging Face's LlamaForCausalLM: children "model" (embed_tokens, layers.0..N-1, norm) and, untied, "lm_head".
/// input ids [B, L] -> logits [B, L, V].
class Llama : public nn::Composite, public IncrementalDecoder, public nn::TensorParallelizable {
 public:
  explicit Llama(LlamaConfig config);
  at::Tensor forward(const at::Tensor& ids) override;
  /// The vocabulary split: model.embed_tokens rowwise (each rank its rows) and, untied, lm_head colwise as the
  /// vocabulary head (a tied head multiplies by the embedding's rows); model.norm on the sequence's slices under
  /// sequence parallelism.
  std::vector<nn::ParallelLayerPlan> tensor_parallel_plan() const override;
  at::Tensor forward_cached(const at::Tensor& ids, KVCache& cache) override;
  /// True while every layer is still a LlamaDecoderLayer, or a wrapper that stands in for one (FSDP's units,
  /// activation checkpointing); a wrapper put in by surgery cannot take a cache.
  bool supports_cache() const override;
  const LlamaConfig& config() const { return config_; }

 private:
  at::Tensor head(const at::Tensor& hidden);
  LlamaConfig config_;
};

}  // namespace composer::models
