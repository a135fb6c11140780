#include "composer/models/generation.h"

#include "composer/models/kv_cache.h"
#include "composer/models/transformer.h"
#include "models/detail/embedding_weight.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace composer::models {

void GenerationOptions::validate() const {
  const auto fail = [](const std::string& field, const std::string& value, const std::string& expected) {
    throw std::invalid_argument("GenerationOptions." + field + " is " + value + ", expected " + expected);
  };
  if (max_length_ < 1) fail("max_length", std::to_string(max_length_), ">= 1");
  if (max_new_tokens_ && *max_new_tokens_ < 1) fail("max_new_tokens", std::to_string(*max_new_tokens_), ">= 1");
  if (!(temperature_ > 0) || !std::isfinite(temperature_)) fail("temperature", std::to_string(temperature_), "> 0");
  if (top_k_ < 0) fail("top_k", std::to_string(top_k_), ">= 0 (0 keeps every token)");
  if (!(top_p_ > 0 && top_p_ <= 1)) fail("top_p", std::to_string(top_p_), "in (0, 1]");
  if (max_context_ < 0) fail("max_context", std::to_string(max_context_), ">= 0 (0: no limit)");
}

at::Tensor warp_logits(const at::Tensor& logits, const GenerationOptions& options) {
  const double neg_inf = -std::numeric_limits<double>::infinity();
  at::Tensor scores = logits;
  if (options.temperature() != 1.0) scores = scores / options.temperature();
  if (options.top_k() != 0) {
    const int64_t k = std::min<int64_t>(options.top_k(), scores.size(-1));
    const at::Tensor kth = std::get<0>(at::topk(scores, k, -1)).narrow(-1, k - 1, 1);
    scores = scores.masked_fill(scores < kth, neg_inf);
  }
  if (options.top_p() < 1.0) {
    auto [sorted, indices] = at::sort(scores, -1, /*descending=*/false);
    at::Tensor remove = sorted.softmax(-1).cumsum(-1) <= (1.0 - options.top_p());
    remove.narrow(-1, remove.size(-1) - 1, 1).fill_(false);  // the most likely token always stays
    scores = scores.masked_fill(remove.scatter(-1, indices, remove), neg_inf);
  }
  return scores;
}

namespace {

// The context limit when none is given: a GPT's position table bounds its sequences.
int64_t model_context(nn::Layer& model) {
  auto* gpt = dynamic_cast<GPT*>(&model);
  return gpt && gpt->has("wpe") ? detail::embedding_weight(gpt->child("wpe")).size(0) : 0;
}

}  // namespace

at::Tensor generate_tokens(nn::Layer& model, const at::Tensor& input_ids, const GenerationOptions& options,
                           std::optional<at::Generator> generator) {
  options.validate();
  if (input_ids.dim() != 2 || input_ids.size(1) < 1 || input_ids.scalar_type() != at::kLong) {
    throw std::invalid_argument("generate_tokens: input_ids must be int64 [batch, length >= 1], got " +
                                std::string(input_ids.scalar_type() == at::kLong ? "int64 " : "another dtype ") +
                                std::to_string(input_ids.dim()) + "-d");
  }
  const int64_t prompt = input_ids.size(1);
  const int64_t new_tokens =
      options.max_new_tokens() ? *options.max_new_tokens() : std::max<int64_t>(options.max_length() - prompt, 1);
  const int64_t max_context = options.max_context() > 0 ? options.max_context() : model_context(model);
  const bool was_training = model.is_training();
  model.eval();
  at::NoGradGuard no_grad;
  at::Tensor ids = input_ids;
  at::Tensor finished = at::zeros({ids.size(0)}, ids.options().dtype(at::kBool));
  // A decoder with a key-value cache runs the prompt once, then one token per step (while no window slides).
  auto* decoder = dynamic_cast<IncrementalDecoder*>(&model);
  const bool cached = decoder && decoder->supports_cache() && (max_context == 0 || prompt + new_tokens <= max_context);
  KVCache cache;
  try {
    for (int64_t step = 0; step < new_tokens; ++step) {
      const int64_t len = ids.size(1);
      const at::Tensor context =
          cached ? ids.narrow(1, cache.length(), len - cache.length())
                 : (max_context > 0 && len > max_context ? ids.narrow(1, len - max_context, max_context) : ids);
      const at::Tensor out = cached ? decoder->forward_cached(context, cache) : model.forward(context);
      const at::Tensor logits = out.select(1, context.size(1) - 1).to(at::kFloat);
      at::Tensor next;
      if (options.do_sample()) {
        // Drawn on the CPU, where `generator` lives, whatever the model's device.
        const at::Tensor probs = warp_logits(logits, options).softmax(-1).cpu();
        next = at::multinomial(probs, 1, /*replacement=*/false, generator).squeeze(1).to(ids.device());
      } else {
        next = logits.argmax(-1);
      }
      if (options.eos_token_id()) {
        next = at::where(finished, at::full_like(next, *options.eos_token_id()), next);
        finished = finished.logical_or(next == *options.eos_token_id());
      }
      ids = at::cat({ids, next.unsqueeze(1)}, 1);
      if (options.eos_token_id() && finished.all().item<bool>()) break;
    }
  } catch (...) {
    model.train(was_training);
    throw;
  }
  model.train(was_training);
  return ids;
}

}  // namespace composer::models
