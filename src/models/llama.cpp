#include "composer/models/llama.h"

#include "models/detail/cached_attention.h"
#include "models/detail/embedding_weight.h"
#include "models/detail/seen_through.h"

#include "composer/nn/deferred_init.h"
#include "composer/nn/layers.h"
#include "composer/nn/rms_norm.h"

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include <stdexcept>
#include <string>

namespace composer::models {
namespace {

// Hugging Face's LlamaPreTrainedModel._init_weights: normal(0, initializer_range) weights, zero biases.
void init_llama(torch::nn::Module& m, double std) {
  const auto normal = [std](at::Tensor& w) { w.normal_(0.0, std); };
  for (auto& item : m.named_modules("", false)) {
    if (auto* l = dynamic_cast<nn::Linear*>(item.value().get())) {
      nn::initialize(l->weight, normal, true);
      if (l->bias.defined())
        nn::initialize(
            l->bias, [](at::Tensor& b) { b.zero_(); }, false);
    } else if (auto* e = dynamic_cast<nn::Embedding*>(item.value().get())) {
      nn::initialize(e->weight, normal, true);
    }
  }
}

std::shared_ptr<nn::Linear> linear(int64_t in, int64_t out, bool bias) {
  return std::make_shared<nn::Linear>(nn::LinearOptions(in, out).bias(bias));
}

}  // namespace

void LlamaConfig::validate() const {
  const auto fail = [](const std::string& field, const std::string& got, const std::string& expected) {
    throw std::invalid_argument("LlamaConfig." + field + " is " + got + ", expected " + expected);
  };
  const auto positive = [&](int64_t v, const char* name) {
    if (v <= 0) fail(name, std::to_string(v), "> 0");
  };
  positive(vocab_size_, "vocab_size");
  positive(hidden_size_, "hidden_size");
  positive(intermediate_size_, "intermediate_size");
  positive(num_hidden_layers_, "num_hidden_layers");
  positive(num_attention_heads_, "num_attention_heads");
  positive(max_position_embeddings_, "max_position_embeddings");
  if (num_key_value_heads_ < 0) fail("num_key_value_heads", std::to_string(num_key_value_heads_), ">= 0");
  if (num_attention_heads_ % kv_heads() != 0) {
    fail("num_key_value_heads", std::to_string(kv_heads()),
         "a divisor of num_attention_heads (" + std::to_string(num_attention_heads_) + ")");
  }
  if (head_dim_ < 0) fail("head_dim", std::to_string(head_dim_), ">= 0");
  if (head_dim_ == 0 && hidden_size_ % num_attention_heads_ != 0) {
    fail("hidden_size", std::to_string(hidden_size_),
         "a multiple of num_attention_heads (" + std::to_string(num_attention_heads_) + ") when head_dim is unset");
  }
  if (dim_per_head() % 2 != 0) fail("head_dim", std::to_string(dim_per_head()), "even (rotary pairs)");
  if (!(rms_norm_eps_ > 0)) fail("rms_norm_eps", std::to_string(rms_norm_eps_), "> 0");
  if (!(rope_theta_ > 0)) fail("rope_theta", std::to_string(rope_theta_), "> 0");
  if (attention_dropout_ < 0 || attention_dropout_ >= 1)
    fail("attention_dropout", std::to_string(attention_dropout_), "in [0, 1)");
  rope_scaling_.validate();
}

LlamaAttention::LlamaAttention(const LlamaConfig& c, std::shared_ptr<RotaryEmbedding> rotary)
    : heads_(c.num_attention_heads()),
      kv_heads_(c.kv_heads()),
      head_dim_(c.dim_per_head()),
      dropout_(c.attention_dropout()),
      rotary_(std::move(rotary)) {
  const bool qkv_bias = c.attention_bias() || c.qkv_bias();
  add("q_proj", linear(c.hidden_size(), heads_ * head_dim_, qkv_bias));
  add("k_proj", linear(c.hidden_size(), kv_heads_ * head_dim_, qkv_bias));
  add("v_proj", linear(c.hidden_size(), kv_heads_ * head_dim_, qkv_bias));
  add("o_proj", linear(heads_ * head_dim_, c.hidden_size(), c.attention_bias()));
}

at::Tensor LlamaAttention::forward(const at::Tensor& x) { return attend(x, nullptr); }

at::Tensor LlamaAttention::forward_cached(const at::Tensor& x, LayerKVCache& layer) { return attend(x, &layer); }

at::Tensor LlamaAttention::attend(const at::Tensor& x, LayerKVCache* cache) {
  const int64_t b = x.size(0), l = x.size(1);
  const int64_t past = cache ? cache->length() : 0;
  // Under tensor parallelism the projections give this rank's heads only (in the same ratio of query to key heads).
  auto heads = [&](const char* proj) { return child(proj).forward(x).view({b, l, -1, head_dim_}).transpose(1, 2); };
  const auto [cos, sin] = rotary_->cos_sin(past, l, x.device(), x.scalar_type());
  const at::Tensor q = apply_rotary(heads("q_proj"), cos, sin);
  const at::Tensor k = apply_rotary(heads("k_proj"), cos, sin);
  const at::Tensor v = heads("v_proj");
  at::Tensor y = detail::attend_cached(q, k, v, cache, heads_ / kv_heads_, is_training() ? dropout_ : 0.0);
  y = y.transpose(1, 2).reshape({b, l, -1});
  return child("o_proj").forward(y);
}

std::vector<nn::ParallelLayerPlan> LlamaAttention::tensor_parallel_plan() const {
  const auto colwise = nn::ParallelStyle::COLWISE;
  return {{"q_proj", colwise, 1, head_dim_},
          {"k_proj", colwise, 1, head_dim_},
          {"v_proj", colwise, 1, head_dim_},
          {"o_proj", nn::ParallelStyle::ROWWISE, 1, head_dim_}};
}

LlamaMLP::LlamaMLP(const LlamaConfig& c) {
  add("gate_proj", linear(c.hidden_size(), c.intermediate_size(), c.mlp_bias()));
  add("up_proj", linear(c.hidden_size(), c.intermediate_size(), c.mlp_bias()));
  add("down_proj", linear(c.intermediate_size(), c.hidden_size(), c.mlp_bias()));
}

at::Tensor LlamaMLP::forward(const at::Tensor& x) {
  return child("down_proj").forward(at::silu(child("gate_proj").forward(x)) * child("up_proj").forward(x));
}

std::vector<nn::ParallelLayerPlan> LlamaMLP::tensor_parallel_plan() const {
  return {{"gate_proj", nn::ParallelStyle::COLWISE},
          {"up_proj", nn::ParallelStyle::COLWISE},
          {"down_proj", nn::ParallelStyle::ROWWISE}};
}

LlamaDecoderLayer::LlamaDecoderLayer(const LlamaConfig& c, std::shared_ptr<RotaryEmbedding> rotary) {
  add("self_attn", std::make_shared<LlamaAttention>(c, std::move(rotary)));
  add("mlp", std::make_shared<LlamaMLP>(c));
  add("input_layernorm", std::make_shared<nn::RMSNorm>(c.hidden_size(), c.rms_norm_eps()));
  add("post_attention_layernorm", std::make_shared<nn::RMSNorm>(c.hidden_size(), c.rms_norm_eps()));
}

at::Tensor LlamaDecoderLayer::forward(const at::Tensor& x) {
  const at::Tensor h = x + child("self_attn").forward(child("input_layernorm").forward(x));
  return h + child("mlp").forward(child("post_attention_layernorm").forward(h));
}

std::vector<nn::ParallelLayerPlan> LlamaDecoderLayer::tensor_parallel_plan() const {
  return {{"input_layernorm", nn::ParallelStyle::SEQUENCE}, {"post_attention_layernorm", nn::ParallelStyle::SEQUENCE}};
}

at::Tensor LlamaDecoderLayer::forward_cached(const at::Tensor& x, LayerKVCache& layer) {
  auto* attn = dynamic_cast<LlamaAttention*>(&child("self_attn"));
  if (!attn) throw std::logic_error("LlamaDecoderLayer::forward_cached: self_attn was replaced by surgery");
  const at::Tensor h = x + attn->forward_cached(child("input_layernorm").forward(x), layer);
  return h + child("mlp").forward(child("post_attention_layernorm").forward(h));
}

Llama::Llama(LlamaConfig config) : config_(std::move(config)) {
  config_.validate();
  auto rotary = std::make_shared<RotaryEmbedding>(config_.dim_per_head(), config_.rope_theta(), config_.rope_scaling());
  auto model = std::make_shared<nn::Sequential>();  // only a container: Llama::forward runs its parts
  model->add("embed_tokens", std::make_shared<nn::Embedding>(config_.vocab_size(), config_.hidden_size()));
  auto layers = std::make_shared<nn::Sequential>();
  for (int64_t i = 0; i < config_.num_hidden_layers(); ++i)
    layers->push_back(std::make_shared<LlamaDecoderLayer>(config_, rotary));
  model->add("layers", layers);
  model->add("norm", std::make_shared<nn::RMSNorm>(config_.hidden_size(), config_.rms_norm_eps()));
  add("model", model);
  if (!config_.tie_word_embeddings())
    add("lm_head", linear(config_.hidden_size(), config_.vocab_size(), /*bias=*/false));
  init_llama(*this, config_.initializer_range());
}

namespace {

// Hugging Face's LlamaModel inside LlamaForCausalLM: "model" holds embed_tokens, layers and norm.
const nn::Composite& decoder_of(const nn::Composite& llama) {
  return dynamic_cast<const nn::Composite&>(llama.child("model"));
}

}  // namespace

at::Tensor Llama::head(const at::Tensor& hidden) {
  const nn::Composite& model = decoder_of(*this);
  const at::Tensor x = model.child("norm").forward(hidden);
  if (has("lm_head")) return child("lm_head").forward(x);
  return detail::tied_logits(model.child("embed_tokens"), x);
}

std::vector<nn::ParallelLayerPlan> Llama::tensor_parallel_plan() const {
  std::vector<nn::ParallelLayerPlan> plan{{"model.embed_tokens", nn::ParallelStyle::ROWWISE},
                                          {"model.norm", nn::ParallelStyle::SEQUENCE}};
  if (has("lm_head")) plan.push_back({"lm_head", nn::ParallelStyle::COLWISE, 1, 1, /*vocabulary_head=*/true});
  return plan;
}

at::Tensor Llama::forward(const at::Tensor& ids) {
  const nn::Composite& model = decoder_of(*this);
  const at::Tensor x = model.child("embed_tokens").forward(ids);
  return head(model.child("layers").forward(x));
}

bool Llama::supports_cache() const {
  const nn::Composite& model = decoder_of(*this);
  const auto& layers = dynamic_cast<const nn::Composite&>(model.child("layers"));
  for (const auto& name : layers.child_names()) {
    auto* layer = detail::seen_through<LlamaDecoderLayer>(layers.child(name));  // through FSDP's units, checkpointing
    if (!layer || !dynamic_cast<const LlamaAttention*>(&layer->child("self_attn"))) return false;
  }
  return true;
}

at::Tensor Llama::forward_cached(const at::Tensor& ids, KVCache& cache) {
  if (!supports_cache()) throw std::logic_error("Llama::forward_cached: a layer was replaced by surgery");
  const nn::Composite& model = decoder_of(*this);
  const auto& layers = dynamic_cast<const nn::Composite&>(model.child("layers"));
  cache.layers.resize(layers.child_names().size());
  at::Tensor x = model.child("embed_tokens").forward(ids);
  for (size_t i = 0; i < layers.child_names().size(); ++i) {
    x = detail::seen_through<LlamaDecoderLayer>(layers.child(layers.child_names()[i]))
            ->forward_cached(x, cache.layers[i]);
  }
  return head(x);
}

}  // namespace composer::models
