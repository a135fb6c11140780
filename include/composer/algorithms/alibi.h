// Alibi: attention with linear biases instead of position embeddings, trained on shorter sequences (Composer's
// Alibi, Press et al. 2021).
#pragma once

#include "composer/algorithms/module_surgery.h"
#include "composer/core/algorithm.h"
#include "composer/core/fields.h"
#include "composer/models/transformer.h"

#include <torch/arg.h>

#include <vector>

namespace composer {
namespace functional {

/// Composer's per-head slopes: for n a power of two, start * start^i with start = 2^(-2^-(log2(n) - 3)); otherwise
/// those of the power of two below n, then every other slope of the power of two above it.
std::vector<double> alibi_head_slopes(int64_t n_heads);

/// Composer's bias (float32): causal [n_heads, 1, max_len], slope * key position (a constant per query row is the
/// same as slope * -(distance) under softmax); bidirectional [1, n_heads, max_len, max_len], slope * -|i - j|.
at::Tensor alibi_bias(int64_t n_heads, int64_t max_len, bool causal);

/// Replaces every models::SelfAttention of `model` by an nn::AlibiSelfAttention (same projections, the bias for
/// max_sequence_length tokens, causal or not as the attention was), and the position embeddings of models::GPT
/// (wpe) and models::BertMLM (position_embeddings) by zero, frozen ones of max_sequence_length rows, which leave
/// `optimizer` when given. Sequences up to max_sequence_length then run, longer than in training. Returns the
/// number of attention modules changed (0: stderr says the model has none we know).
int64_t apply_alibi(torch::nn::Module& model, int64_t max_sequence_length,
                    torch::optim::Optimizer* optimizer = nullptr);

}  // namespace functional

namespace nn {

/// Self-attention with ALiBi: softmax(q k^T / sqrt(D) + bias [+ causal mask]) v, with the bias of
/// functional::alibi_bias as the buffer `alibi` (Composer's name); the projections are the old module's children.
class AlibiSelfAttention : public Composite {
 public:
  AlibiSelfAttention(models::SelfAttention& attention, int64_t max_sequence_length);
  at::Tensor forward(const at::Tensor& x) override;
  int64_t n_head() const { return n_head_; }
  bool causal() const { return causal_; }

 private:
  int64_t n_head_;
  bool causal_;
  double dropout_;
  at::Tensor alibi_;
};

}  // namespace nn

namespace algorithms {

struct AlibiOptions {
  /// The longest sequence the model will see, in training or evaluation (required, as in Composer).
  TORCH_ARG(Required<int64_t>, max_sequence_length);
  /// Training batches [B, L] become [B / s, L * s]; 1 keeps them.
  TORCH_ARG(double, train_sequence_length_scaling) = 0.25;

 public:
  void validate() const;
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("max_sequence_length", self.max_sequence_length_,
          "required: the longest sequence the model will see (training or evaluation)");
    visit("train_sequence_length_scaling", self.train_sequence_length_scaling_,
          "training batches [B, L] become [B / s, L * s], in (0, 1]");
  }
};

/// INIT (once): functional::apply_alibi. AFTER_DATALOADER: reshapes every sequence-shaped field of a token batch
/// (one with input_ids) from [B, L] to [B / s, L * s], so training runs on shorter sequences and evaluation (not
/// reshaped) on the full ones. Required on load.
class Alibi : public Algorithm {
 public:
  explicit Alibi(AlibiOptions options);
  bool match(Event event, const State& state) override;
  std::optional<int> apply(Event event, State& state, Logger& logger) override;
  bool required_on_load() const override { return true; }
  std::string repr() const override;
  const AlibiOptions& options() const { return options_; }

 private:
  AlibiOptions options_;
  bool applied_ = false;
};

}  // namespace algorithms
}  // namespace composer
