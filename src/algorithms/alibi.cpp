#include "composer/algorithms/alibi.h"

#include "algorithms/detail/common.h"
#include "composer/core/fields.h"
#include "composer/core/state.h"
#include "composer/models/composer_model.h"
#include "composer/models/llama.h"
#include "composer/nn/layers.h"

#include <ATen/ATen.h>

#include <cmath>
#include <iostream>
#include <limits>
#include <stdexcept>

namespace composer {
namespace functional {
namespace {

std::vector<double> slopes_power_of_2(int64_t n) {
  const double start = std::pow(2.0, -std::pow(2.0, -(std::log2(static_cast<double>(n)) - 3)));
  std::vector<double> out;
  for (int64_t i = 0; i < n; ++i) out.push_back(start * std::pow(start, static_cast<double>(i)));
  return out;
}

// A zero, frozen position embedding of `rows` rows in place of child `name` of `owner`; the old weight leaves the
// optimizer.
void zero_and_freeze(nn::Composite& owner, const std::string& name, int64_t rows, torch::optim::Optimizer* optimizer) {
  const auto& old = static_cast<const nn::Embedding&>(owner.child(name));
  auto fresh = std::make_shared<nn::Embedding>(rows, old.weight.size(1), 0.0);
  fresh->to(old.weight.device(), old.weight.scalar_type());
  {
    at::NoGradGuard no_grad;
    fresh->weight.zero_();
  }
  fresh->weight.requires_grad_(false);
  if (optimizer) remove_params_from_optimizer({old.weight}, *optimizer);
  owner.replace(name, fresh);
}

}  // namespace

std::vector<double> alibi_head_slopes(int64_t n_heads) {
  if (n_heads <= 0)
    throw std::invalid_argument("alibi_head_slopes: n_heads must be > 0, got " + std::to_string(n_heads));
  const double log2n = std::log2(static_cast<double>(n_heads));
  if (log2n == std::floor(log2n)) return slopes_power_of_2(n_heads);
  const auto closest = static_cast<int64_t>(std::pow(2.0, std::floor(log2n)));
  std::vector<double> out = slopes_power_of_2(closest);
  const std::vector<double> wider = alibi_head_slopes(2 * closest);
  for (size_t i = 0; i < wider.size() && static_cast<int64_t>(out.size()) < n_heads; i += 2) out.push_back(wider[i]);
  return out;
}

at::Tensor alibi_bias(int64_t n_heads, int64_t max_len, bool causal) {
  if (max_len <= 0) throw std::invalid_argument("alibi_bias: max_len must be > 0, got " + std::to_string(max_len));
  std::vector<float> slopes;
  for (double s : alibi_head_slopes(n_heads)) slopes.push_back(static_cast<float>(s));
  const at::Tensor slope =
      at::tensor(slopes, at::TensorOptions().dtype(at::kFloat)).view({n_heads, 1, 1});  // float32, as Composer's
  const at::Tensor positions = at::arange(max_len, at::TensorOptions().dtype(at::kLong));
  if (causal) return slope * positions.view({1, 1, max_len}).expand({n_heads, 1, max_len});
  const at::Tensor relative = (positions.view({1, max_len}) - positions.view({max_len, 1})).abs();
  return (slope * -relative.unsqueeze(0).expand({n_heads, max_len, max_len})).unsqueeze(0);
}

int64_t apply_alibi(torch::nn::Module& model, int64_t max_sequence_length, torch::optim::Optimizer* optimizer) {
  if (max_sequence_length <= 0) {
    algorithms::detail::bad_option("apply_alibi", "max_sequence_length", "> 0",
                                   static_cast<double>(max_sequence_length));
  }
  // A Llama-family model encodes positions by rotating queries and keys: adding ALiBi's biases on top would train a
  // model with two position schemes, which no reference does (Composer's Alibi has no Llama policy).
  for (const auto& module : model.modules(/*include_self=*/false)) {
    if (dynamic_cast<models::LlamaAttention*>(module.get())) {
      throw std::invalid_argument(
          "Alibi does not apply to models::Llama: its attention uses rotary position embeddings (Alibi replaces the "
          "learned position embeddings of GPT and BERT); remove Alibi from the algorithms");
    }
  }
  // The attention keeps its projections (the same parameters), so the optimizer needs no change for it.
  std::vector<ReplacementPolicy> policies{
      policy_for<models::SelfAttention>([&](models::SelfAttention& attention, int64_t) -> std::shared_ptr<nn::Layer> {
        return std::make_shared<nn::AlibiSelfAttention>(attention, max_sequence_length);
      })};
  const auto done = replace_module_classes(model, policies);
  for (const auto& module : model.modules(/*include_self=*/true)) {
    if (auto* gpt = dynamic_cast<models::GPT*>(module.get())) {
      zero_and_freeze(*gpt, "wpe", max_sequence_length, optimizer);
    } else if (auto* bert = dynamic_cast<models::BertMLM*>(module.get())) {
      zero_and_freeze(*bert, "position_embeddings", max_sequence_length, optimizer);
    }
  }
  if (done.empty()) {
    std::cerr << "composer: Alibi had no effect: the model has no models::SelfAttention (our GPT and BERT have)\n";
  }
  return static_cast<int64_t>(done.size());
}

}  // namespace functional

namespace nn {

AlibiSelfAttention::AlibiSelfAttention(models::SelfAttention& attention, int64_t max_sequence_length)
    : n_head_(attention.n_head()), causal_(attention.causal()), dropout_(attention.dropout()) {
  add("c_attn", attention.child_ptr("c_attn"));
  add("c_proj", attention.child_ptr("c_proj"));
  const at::Tensor& w = static_cast<const Linear&>(child("c_attn")).weight;
  alibi_ = register_buffer("alibi", functional::alibi_bias(n_head_, max_sequence_length, causal_).to(w.device()));
}

at::Tensor AlibiSelfAttention::forward(const at::Tensor& x) {
  const int64_t b = x.size(0), l = x.size(1), d = x.size(2), hd = d / n_head_;
  const int64_t max_len = alibi_.size(-1);
  if (l > max_len) {
    throw std::invalid_argument("Alibi: sequence length " + std::to_string(l) + " exceeds max_sequence_length " +
                                std::to_string(max_len));
  }
  const auto qkv = child("c_attn").forward(x).split(d, 2);
  auto heads = [&](const at::Tensor& t) { return t.view({b, l, n_head_, hd}).transpose(1, 2); };
  const at::Tensor q = heads(qkv[0]);
  at::Tensor bias;
  if (causal_) {
    const at::Tensor future =
        at::full({l, l}, -std::numeric_limits<float>::infinity(), alibi_.options()).triu(1);  // no peeking ahead
    bias = alibi_.narrow(2, 0, l) + future;                                                   // [H, L, L]
  } else {
    bias = alibi_.narrow(2, 0, l).narrow(3, 0, l);  // [1, H, L, L]
  }
  at::Tensor y = at::scaled_dot_product_attention(q, heads(qkv[1]), heads(qkv[2]), bias.to(q.scalar_type()), 0.0,
                                                  /*is_causal=*/false);
  y = y.transpose(1, 2).contiguous().view({b, l, d});
  return at::dropout(child("c_proj").forward(y), dropout_, is_training());
}

}  // namespace nn

namespace algorithms {

void AlibiOptions::validate() const {
  const int64_t max = required_value(max_sequence_length_, "Alibi", "max_sequence_length", "a number of tokens > 0");
  if (max <= 0) detail::bad_option("Alibi", "max_sequence_length", "> 0", static_cast<double>(max));
  detail::require_range("Alibi", "train_sequence_length_scaling", train_sequence_length_scaling_, 0.0, 1.0, true);
}

Alibi::Alibi(AlibiOptions options) : options_(std::move(options)) { options_.validate(); }

bool Alibi::match(Event event, const State&) {
  return (event == Event::INIT && !applied_) || event == Event::AFTER_DATALOADER;
}

std::optional<int> Alibi::apply(Event event, State& state, Logger&) {
  if (event == Event::INIT) {
    if (state.model) functional::apply_alibi(*state.model, *options_.max_sequence_length(), state.optimizer.get());
    applied_ = true;
    return std::nullopt;
  }
  const double s = options_.train_sequence_length_scaling();
  if (s == 1.0 || !state.batch.has("input_ids")) return std::nullopt;  // Composer reshapes dict (token) batches only
  std::vector<std::pair<std::string, at::Tensor>> fields;
  for (const auto& [key, t] : state.batch.fields()) {
    if (!t.defined() || t.dim() != 2) {
      throw std::invalid_argument("Alibi: batch field '" + key + "' must be [batch, sequence] to be reshaped, got " +
                                  (t.defined() ? c10::str(t.sizes()) : std::string("(none)")));
    }
    const auto rows = static_cast<int64_t>(static_cast<double>(t.size(0)) / s);
    const auto length = static_cast<int64_t>(static_cast<double>(t.size(1)) * s);
    if (rows * length != t.numel()) {
      throw std::invalid_argument("Alibi: cannot reshape batch field '" + key + "' of shape " + c10::str(t.sizes()) +
                                  " to [" + std::to_string(rows) + ", " + std::to_string(length) +
                                  "]: sequence length x train_sequence_length_scaling must be a whole number");
    }
    fields.emplace_back(key, t.reshape({rows, length}));
  }
  state.batch = Batch(std::move(fields));
  return std::nullopt;
}

std::string Alibi::repr() const { return options_repr("Alibi", options_); }

}  // namespace algorithms
}  // namespace composer
