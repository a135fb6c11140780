// Transformer language models, surgery-ready: a GPT-2-style causal decoder and a BERT-style encoder for masked LM.
#pragma once

#include "composer/models/kv_cache.h"
#include "composer/nn/layers.h"
#include "composer/nn/tensor_parallel_plan.h"

#include <torch/arg.h>

#include <memory>
#include <string>

namespace composer::models {

struct TransformerConfig {
  TORCH_ARG(int64_t, vocab_size) = 50257;
  TORCH_ARG(int64_t, max_seq_len) = 1024;
  TORCH_ARG(int64_t, n_layer) = 12;
  TORCH_ARG(int64_t, n_head) = 12;
  TORCH_ARG(int64_t, d_model) = 768;
  /// Feed-forward width; 0 = 4 * d_model.
  TORCH_ARG(int64_t, d_ff) = 0;
  TORCH_ARG(double, dropout) = 0.0;
  /// The feed-forward activation: "gelu" (exact), or GPT-2's "gelu_new" (tanh approximation; also
  /// "gelu_pytorch_tanh", Hugging Face's name for the same).
  TORCH_ARG(std::string, activation) = "gelu";
  /// LayerNorm epsilon of the GPT blocks (Hugging Face's layer_norm_epsilon).
  TORCH_ARG(double, layer_norm_eps) = 1e-5;

 public:
  /// Throws std::invalid_argument naming the bad field (d_model must divide by n_head, ...).
  void validate() const;
  int64_t ff() const { return d_ff_ > 0 ? d_ff_ : 4 * d_model_; }
};

/// Multi-head self-attention: c_attn (d -> 3d), attention, c_proj (d -> d).
class SelfAttention : public nn::Composite, public nn::TensorParallelizable {
 public:
  SelfAttention(int64_t d_model, int64_t n_head, bool causal, double dropout);
  at::Tensor forward(const at::Tensor& x) override;
  /// Causal attention only: attends from x's positions (after the cached ones) to the cache and x, appending x's keys
  /// and values to `layer` (std::logic_error for a non-causal attention).
  at::Tensor forward_cached(const at::Tensor& x, LayerKVCache& layer);
  int64_t n_head() const { return n_head_; }
  /// c_attn column-parallel in its three blocks (queries, keys, values), c_proj row-parallel, by whole heads.
  std::vector<nn::ParallelLayerPlan> tensor_parallel_plan() const override;
  bool causal() const { return causal_; }
  double dropout() const { return dropout_; }

 private:
  int64_t n_head_;
  bool causal_;
  double dropout_;
};

/// Pre-LN block: x + attn(ln_1(x)), then x + mlp(ln_2(x)).
class GPTBlock : public nn::Composite, public nn::TensorParallelizable {
 public:
  explicit GPTBlock(const TransformerConfig& c);
  at::Tensor forward(const at::Tensor& x) override;
  at::Tensor forward_cached(const at::Tensor& x, LayerKVCache& layer);
  /// mlp.c_fc column-parallel, mlp.c_proj row-parallel (the attention describes its own); ln_1 and ln_2 on the
  /// sequence's slice under sequence parallelism.
  std::vector<nn::ParallelLayerPlan> tensor_parallel_plan() const override;
};

/// GPT-2: wte + wpe, drop (the embedding dropout), blocks h.0..h.N-1, ln_f, and a head tied to wte. input ids [B, L] ->
/// logits [B, L, V]. Sequences may be as long as wpe has rows (config().max_seq_len, or what Alibi enlarged it to).
class GPT : public nn::Composite, public IncrementalDecoder, public nn::TensorParallelizable {
 public:
  explicit GPT(TransformerConfig config);
  at::Tensor forward(const at::Tensor& ids) override;
  /// Under sequence parallelism the region runs from the embedding dropout (`drop`, SEQUENCE_START: wte and wpe stay
  /// whole) through the blocks' norms (SEQUENCE) to `ln_f` (SEQUENCE_END: it and the tied head run whole).
  std::vector<nn::ParallelLayerPlan> tensor_parallel_plan() const override;
  /// Logits for `ids` at positions cache.length() .., extending `cache` (generation with a key-value cache).
  at::Tensor forward_cached(const at::Tensor& ids, KVCache& cache) override;
  /// True while every block is (or a wrapper stands in for: FSDP's units, activation checkpointing) a GPTBlock with
  /// its SelfAttention (Alibi's attention, or a wrapper put in by surgery, cannot take a cache; generation then runs
  /// the full forward).
  bool supports_cache() const override;
  const TransformerConfig& config() const { return config_; }

 private:
  TransformerConfig config_;
};

/// Post-LN BERT layer: ln_1(x + attention(x)), then ln_2(x + ffn(x)).
class BertLayer : public nn::Composite, public nn::TensorParallelizable {
 public:
  explicit BertLayer(const TransformerConfig& c);
  at::Tensor forward(const at::Tensor& x) override;
  /// ffn.intermediate column-parallel, ffn.output row-parallel (the attention describes its own).
  std::vector<nn::ParallelLayerPlan> tensor_parallel_plan() const override;
};

/// BERT encoder with a masked-LM head tied to the word embeddings. input ids [B, L] -> logits [B, L, V].
class BertMLM : public nn::Composite {
 public:
  explicit BertMLM(TransformerConfig config);
  at::Tensor forward(const at::Tensor& ids) override;
  const TransformerConfig& config() const { return config_; }

 private:
  TransformerConfig config_;
  at::Tensor decoder_bias_;
};

}  // namespace composer::models
