// Text generation from a causal language model ([B, L] ids -> [B, L, V] logits), as Hugging Face's generate() with
// its defaults: greedy decoding, or sampling with temperature, top-k and top-p; stops at max_length (prompt and new
// tokens together) or max_new_tokens, or when every row has produced the end-of-sequence token.
#pragma once

#include "composer/nn/layer.h"

#include <ATen/core/Generator.h>
#include <torch/arg.h>

#include <cstdint>
#include <optional>

namespace composer::models {

struct GenerationOptions {
  /// Prompt plus new tokens (Hugging Face's max_length, default 20); ignored when max_new_tokens is set.
  TORCH_ARG(int64_t, max_length) = 20;
  /// New tokens to generate; wins over max_length when set.
  TORCH_ARG(std::optional<int64_t>, max_new_tokens) = std::nullopt;
  /// Sample from the distribution; false: greedy (the most likely token).
  TORCH_ARG(bool, do_sample) = false;
  /// Logits are divided by this before sampling.
  TORCH_ARG(double, temperature) = 1.0;
  /// Sampling keeps the k most likely tokens (0: all).
  TORCH_ARG(int64_t, top_k) = 50;
  /// Sampling keeps the smallest set of most likely tokens whose probability reaches top_p (1.0: all).
  TORCH_ARG(double, top_p) = 1.0;
  /// A row ends at this token; later positions are filled with it (the tokenizer's end of text, when it has one).
  TORCH_ARG(std::optional<int64_t>, eos_token_id) = std::nullopt;
  /// Longest context the model takes: longer inputs keep their last tokens. 0: a models::GPT's position table
  /// (its rows), no limit for other models.
  TORCH_ARG(int64_t, max_context) = 0;

 public:
  /// Hugging Face generate()'s arguments (eos_token_id and max_context come from the tokenizer and the model).
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("max_length", self.max_length_, "prompt plus new tokens, when max_new_tokens is unset");
    visit("max_new_tokens", self.max_new_tokens_, "new tokens per prompt");
    visit("do_sample", self.do_sample_, "sample instead of greedy decoding");
    visit("temperature", self.temperature_, "sampling temperature");
    visit("top_k", self.top_k_, "sampling keeps the k most likely tokens (0: all)");
    visit("top_p", self.top_p_, "sampling keeps the most likely tokens up to this probability");
  }
  /// Throws std::invalid_argument naming the field: max_length/max_new_tokens below 1, temperature <= 0,
  /// top_k < 0, top_p outside (0, 1], max_context < 0.
  void validate() const;
};

/// The prompts `input_ids` [B, L] (int64, on the model's device) followed by the generated tokens: [B, L + n], with
/// at least one new token, as Hugging Face's. Runs `model` without gradients; its training mode is left as it was.
/// `generator` draws the samples (do_sample), so that generation neither uses nor moves the global random state.
at::Tensor generate_tokens(nn::Layer& model, const at::Tensor& input_ids, const GenerationOptions& options,
                           std::optional<at::Generator> generator = std::nullopt);

/// Hugging Face's logits processing for sampling, in its order: temperature, then top-k, then top-p (removed
/// entries set to -inf). logits: [B, V], float.
at::Tensor warp_logits(const at::Tensor& logits, const GenerationOptions& options);

}  // namespace composer::models
