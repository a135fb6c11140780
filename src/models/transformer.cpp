#include "composer/models/transformer.h"

#include "models/detail/cached_attention.h"
#include "models/detail/embedding_weight.h"
#include "models/detail/seen_through.h"

#include "composer/nn/deferred_init.h"
#include "composer/utils/compat.h"

#include <torch/torch.h>

#include <cmath>
#include <stdexcept>

namespace composer::models {
namespace {

// GPT-2 initialisation: N(0, 0.02) weights, zero biases, residual projections scaled by 1/sqrt(2 * n_layer).
void init_transformer(torch::nn::Module& m, int64_t n_layer) {
  const auto normal = [](double std) { return [std](at::Tensor& w) { w.normal_(0.0, std); }; };
  for (auto& item : m.named_modules("", false)) {
    if (auto* l = dynamic_cast<nn::Linear*>(item.value().get())) {
      const bool residual = item.key().size() >= 6 && item.key().compare(item.key().size() - 6, 6, "c_proj") == 0;
      nn::initialize(l->weight, normal(residual ? 0.02 / std::sqrt(2.0 * static_cast<double>(n_layer)) : 0.02), true);
      if (l->bias.defined())
        nn::initialize(
            l->bias, [](at::Tensor& b) { b.zero_(); }, false);
    } else if (auto* e = dynamic_cast<nn::Embedding*>(item.value().get())) {
      nn::initialize(e->weight, normal(0.02), true);
    }
  }
}

// Positions past..past+L-1 for the position embedding `table`, whose rows bound the sequence length.
at::Tensor positions(const at::Tensor& ids, const nn::Layer& table, int64_t past = 0) {
  const int64_t max_len = detail::embedding_weight(table).size(0);
  const int64_t l = past + ids.size(1);
  if (l > max_len) {
    throw std::invalid_argument("sequence length " + std::to_string(l) + " exceeds max_seq_len " +
                                std::to_string(max_len));
  }
  return at::arange(past, l, ids.options().dtype(at::kLong));
}

// SelfAttention's forward around `attend` (of the [B, H, L, D] queries, keys and values): c_attn, split into heads,
// attend, merge the heads, c_proj, dropout. With or without a key-value cache.
template <class Attend>
at::Tensor project_attention(const SelfAttention& self, const at::Tensor& x, Attend&& attend) {
  // Under tensor parallelism c_attn gives this rank's heads only: the head count comes from its output.
  const int64_t b = x.size(0), l = x.size(1), hd = x.size(2) / self.n_head();
  const auto qkv = self.child("c_attn").forward(x).chunk(3, 2);
  const auto split = [&](const at::Tensor& t) { return t.view({b, l, -1, hd}).transpose(1, 2); };
  at::Tensor y = attend(split(qkv[0]), split(qkv[1]), split(qkv[2]));
  y = y.transpose(1, 2).contiguous().view({b, l, -1});
  return at::dropout(self.child("c_proj").forward(y), self.dropout(), self.is_training());
}

}  // namespace

std::vector<nn::ParallelLayerPlan> SelfAttention::tensor_parallel_plan() const {
  const auto* c_attn = dynamic_cast<const nn::Linear*>(&child("c_attn"));
  const int64_t head_dim = c_attn ? c_attn->in_features / n_head_ : 1;
  return {{"c_attn", nn::ParallelStyle::COLWISE, 3, head_dim}, {"c_proj", nn::ParallelStyle::ROWWISE, 1, head_dim}};
}

std::vector<nn::ParallelLayerPlan> GPTBlock::tensor_parallel_plan() const {
  return {{"mlp.c_fc", nn::ParallelStyle::COLWISE},
          {"mlp.c_proj", nn::ParallelStyle::ROWWISE},
          {"ln_1", nn::ParallelStyle::SEQUENCE},
          {"ln_2", nn::ParallelStyle::SEQUENCE}};
}

std::vector<nn::ParallelLayerPlan> GPT::tensor_parallel_plan() const {
  return {{"drop", nn::ParallelStyle::SEQUENCE_START}, {"ln_f", nn::ParallelStyle::SEQUENCE_END}};
}

std::vector<nn::ParallelLayerPlan> BertLayer::tensor_parallel_plan() const {
  return {{"ffn.intermediate", nn::ParallelStyle::COLWISE}, {"ffn.output", nn::ParallelStyle::ROWWISE}};
}

void TransformerConfig::validate() const {
  auto positive = [](int64_t v, const char* n) {
    if (v <= 0)
      throw std::invalid_argument(std::string("TransformerConfig.") + n + " must be > 0, got " + std::to_string(v));
  };
  positive(vocab_size_, "vocab_size");
  positive(max_seq_len_, "max_seq_len");
  positive(n_layer_, "n_layer");
  positive(n_head_, "n_head");
  positive(d_model_, "d_model");
  if (d_model_ % n_head_ != 0) {
    throw std::invalid_argument("TransformerConfig.d_model (" + std::to_string(d_model_) +
                                ") must be divisible by n_head (" + std::to_string(n_head_) + ")");
  }
  if (dropout_ < 0 || dropout_ >= 1) throw std::invalid_argument("TransformerConfig.dropout must be in [0, 1)");
  if (activation_ != "gelu" && activation_ != "gelu_new" && activation_ != "gelu_pytorch_tanh") {
    throw std::invalid_argument("TransformerConfig.activation is '" + activation_ +
                                "'; expected gelu, gelu_new or gelu_pytorch_tanh");
  }
  if (!(layer_norm_eps_ > 0)) throw std::invalid_argument("TransformerConfig.layer_norm_eps must be > 0");
}

SelfAttention::SelfAttention(int64_t d, int64_t n_head, bool causal, double dropout)
    : n_head_(n_head), causal_(causal), dropout_(dropout) {
  add("c_attn", std::make_shared<nn::Linear>(d, 3 * d));
  add("c_proj", std::make_shared<nn::Linear>(d, d));
}

at::Tensor SelfAttention::forward(const at::Tensor& x) {
  return project_attention(*this, x, [this](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
    return compat::attention(q, k, v, causal_);
  });
}

at::Tensor SelfAttention::forward_cached(const at::Tensor& x, LayerKVCache& layer) {
  if (!causal_) throw std::logic_error("SelfAttention::forward_cached: the attention is not causal");
  return project_attention(*this, x, [&layer](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
    return detail::attend_cached(q, k, v, &layer, 1, 0.0);
  });
}

GPTBlock::GPTBlock(const TransformerConfig& c) {
  add("ln_1", std::make_shared<nn::LayerNorm>(c.d_model(), c.layer_norm_eps()));
  add("attn", std::make_shared<SelfAttention>(c.d_model(), c.n_head(), /*causal=*/true, c.dropout()));
  add("ln_2", std::make_shared<nn::LayerNorm>(c.d_model(), c.layer_norm_eps()));
  auto mlp = std::make_shared<nn::Sequential>();
  mlp->add("c_fc", std::make_shared<nn::Linear>(c.d_model(), c.ff()));
  mlp->add("gelu", std::make_shared<nn::GELU>(c.activation() == "gelu" ? "none" : "tanh"));
  mlp->add("c_proj", std::make_shared<nn::Linear>(c.ff(), c.d_model()));
  mlp->add("dropout", std::make_shared<nn::Dropout>(c.dropout()));
  add("mlp", mlp);
}

at::Tensor GPTBlock::forward(const at::Tensor& x) {
  const at::Tensor h = x + child("attn").forward(child("ln_1").forward(x));
  return h + child("mlp").forward(child("ln_2").forward(h));
}

GPT::GPT(TransformerConfig config) : config_(config) {
  config_.validate();
  add("wte", std::make_shared<nn::Embedding>(config_.vocab_size(), config_.d_model()));
  add("wpe", std::make_shared<nn::Embedding>(config_.max_seq_len(), config_.d_model()));
  add("drop", std::make_shared<nn::Dropout>(config_.dropout()));
  auto h = std::make_shared<nn::Sequential>();
  for (int64_t i = 0; i < config_.n_layer(); ++i) h->push_back(std::make_shared<GPTBlock>(config_));
  add("h", h);
  add("ln_f", std::make_shared<nn::LayerNorm>(config_.d_model(), config_.layer_norm_eps()));
  init_transformer(*this, config_.n_layer());
}

at::Tensor GPT::forward(const at::Tensor& ids) {
  at::Tensor x = child("wte").forward(ids) + child("wpe").forward(positions(ids, child("wpe")));
  x = child("ln_f").forward(child("h").forward(child("drop").forward(x)));
  return detail::tied_logits(child("wte"), x);
}

at::Tensor GPTBlock::forward_cached(const at::Tensor& x, LayerKVCache& layer) {
  auto* attn = dynamic_cast<SelfAttention*>(&child("attn"));
  if (!attn) throw std::logic_error("GPTBlock::forward_cached: attn was replaced by surgery");
  const at::Tensor h = x + attn->forward_cached(child("ln_1").forward(x), layer);
  return h + child("mlp").forward(child("ln_2").forward(h));
}

bool GPT::supports_cache() const {
  const auto& h = dynamic_cast<const nn::Composite&>(child("h"));
  for (const auto& name : h.child_names()) {
    auto* block = detail::seen_through<GPTBlock>(h.child(name));  // through FSDP's units, checkpointing
    if (!block || !dynamic_cast<const SelfAttention*>(&block->child("attn"))) return false;
  }
  return true;
}

at::Tensor GPT::forward_cached(const at::Tensor& ids, KVCache& cache) {
  if (!supports_cache()) throw std::logic_error("GPT::forward_cached: a block was replaced by surgery");
  const auto& h = dynamic_cast<const nn::Composite&>(child("h"));
  cache.layers.resize(h.child_names().size());
  at::Tensor x = child("wte").forward(ids) + child("wpe").forward(positions(ids, child("wpe"), cache.length()));
  x = child("drop").forward(x);
  for (size_t i = 0; i < h.child_names().size(); ++i)
    x = detail::seen_through<GPTBlock>(h.child(h.child_names()[i]))->forward_cached(x, cache.layers[i]);
  return detail::tied_logits(child("wte"), child("ln_f").forward(x));
}

BertLayer::BertLayer(const TransformerConfig& c) {
  add("attention", std::make_shared<SelfAttention>(c.d_model(), c.n_head(), /*causal=*/false, c.dropout()));
  add("ln_1", std::make_shared<nn::LayerNorm>(c.d_model(), 1e-12));
  auto ffn = std::make_shared<nn::Sequential>();
  ffn->add("intermediate", std::make_shared<nn::Linear>(c.d_model(), c.ff()));
  ffn->add("gelu", std::make_shared<nn::GELU>());
  ffn->add("output", std::make_shared<nn::Linear>(c.ff(), c.d_model()));
  ffn->add("dropout", std::make_shared<nn::Dropout>(c.dropout()));
  add("ffn", ffn);
  add("ln_2", std::make_shared<nn::LayerNorm>(c.d_model(), 1e-12));
}

at::Tensor BertLayer::forward(const at::Tensor& x) {
  const at::Tensor h = child("ln_1").forward(x + child("attention").forward(x));
  return child("ln_2").forward(h + child("ffn").forward(h));
}

BertMLM::BertMLM(TransformerConfig config) : config_(config) {
  config_.validate();
  add("word_embeddings", std::make_shared<nn::Embedding>(config_.vocab_size(), config_.d_model()));
  add("position_embeddings", std::make_shared<nn::Embedding>(config_.max_seq_len(), config_.d_model()));
  add("embeddings_ln", std::make_shared<nn::LayerNorm>(config_.d_model(), 1e-12));
  auto layers = std::make_shared<nn::Sequential>();
  for (int64_t i = 0; i < config_.n_layer(); ++i) layers->push_back(std::make_shared<BertLayer>(config_));
  add("layers", layers);
  auto head = std::make_shared<nn::Sequential>();
  head->add("dense", std::make_shared<nn::Linear>(config_.d_model(), config_.d_model()));
  head->add("gelu", std::make_shared<nn::GELU>());
  head->add("ln", std::make_shared<nn::LayerNorm>(config_.d_model(), 1e-12));
  add("head", head);
  decoder_bias_ = register_parameter("decoder_bias", nn::new_parameter({config_.vocab_size()}));
  nn::initialize(
      decoder_bias_, [](at::Tensor& b) { b.zero_(); }, false);
  init_transformer(*this, config_.n_layer());
}

at::Tensor BertMLM::forward(const at::Tensor& ids) {
  at::Tensor x = child("word_embeddings").forward(ids) +
                 child("position_embeddings").forward(positions(ids, child("position_embeddings")));
  x = at::dropout(child("embeddings_ln").forward(x), config_.dropout(), is_training());
  x = child("head").forward(child("layers").forward(x));
  return detail::tied_logits(child("word_embeddings"), x, decoder_bias_);
}

}  // namespace composer::models
