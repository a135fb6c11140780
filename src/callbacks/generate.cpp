#include "composer/callbacks/generate.h"

#include "composer/core/autocast.h"
#include "composer/core/logger.h"
#include "composer/core/state.h"
#include "composer/data/text.h"
#include "composer/dist/env.h"
#include "composer/dist/strategy.h"
#include "composer/models/language_model.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <map>
#include <stdexcept>

namespace composer {
namespace {

ComposerLanguageModel& causal_language_model(State& state) {
  auto* lm = dynamic_cast<ComposerLanguageModel*>(state.model.get());
  if (!lm) throw std::invalid_argument("Generate: the model must be a ComposerLanguageModel (a causal token model)");
  if (lm->masked())
    throw std::invalid_argument("Generate: the model is a masked language model; generation needs a causal one");
  if (!lm->tokenizer()) {
    throw std::invalid_argument(
        "Generate: the model has no tokenizer; give it one with ComposerLanguageModel::set_tokenizer (the CLI "
        "uses the training data's)");
  }
  return *lm;
}

}  // namespace

Generate::Generate(GenerateOptions options) : options_(std::move(options)) {
  const auto& prompts = required_value(options_.prompts(), "Generate", "prompts", "a list of strings");
  if (prompts.empty()) throw std::invalid_argument("Generate.prompts is empty, expected at least one prompt");
  for (size_t i = 0; i < prompts.size(); ++i)
    if (prompts[i].empty()) throw std::invalid_argument("Generate.prompts[" + std::to_string(i) + "] is empty");
  const Time& interval = required_value(options_.interval(), "Generate", "interval", "a time such as '100ba'");
  if (options_.batch_size() && *options_.batch_size() < 1)
    throw std::invalid_argument("Generate.batch_size is " + std::to_string(*options_.batch_size()) + ", expected >= 1");
  try {
    options_.generation().validate();
  } catch (const std::invalid_argument& e) {
    std::string what = e.what();
    throw std::invalid_argument("Generate." + what.substr(what.find('.') + 1));
  }
  try {
    check_interval_ = create_interval_scheduler(interval);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string("Generate.interval: ") + e.what());
  }
}

void Generate::run_event(Event event, State& state, Logger& logger) {
  if (!state.get_elapsed_duration() || !check_interval_(state, event)) return;
  if (last_generate_batch_ == state.timestamp.batch) return;
  last_generate_batch_ = state.timestamp.batch;
  const std::vector<std::string> generations = generate(state);
  if (dist::get_global_rank() != 0) return;
  std::vector<std::vector<nlohmann::json>> rows;
  const auto& prompts = *options_.prompts();
  for (size_t i = 0; i < prompts.size(); ++i) rows.push_back({prompts[i], generations[i]});
  logger.log_table({"prompt", "generation"}, rows, "generations");
}

std::vector<std::string> Generate::generate(State& state) {
  ComposerLanguageModel& lm = causal_language_model(state);
  const Tokenizer& tokenizer = *lm.tokenizer();
  const auto& prompts = *options_.prompts();
  models::GenerationOptions generation = options_.generation();
  generation.eos_token_id(tokenizer.eos_token());
  // Prompts of one token length go together, in order, so that no padding changes what a prompt generates.
  std::map<size_t, std::vector<size_t>> by_length;
  std::vector<std::vector<int64_t>> encoded(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    try {
      encoded[i] = tokenizer.encode(prompts[i]);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument("Generate.prompts[" + std::to_string(i) + "]: " + e.what());
    }
    if (encoded[i].empty()) throw std::invalid_argument("Generate.prompts[" + std::to_string(i) + "] has no tokens");
    by_length[encoded[i].size()].push_back(i);
  }
  const auto batch_size = static_cast<size_t>(options_.batch_size().value_or(static_cast<int64_t>(prompts.size())));
  at::Generator generator = at::detail::createCPUGenerator(static_cast<uint64_t>(options_.seed()) * 1000003u +
                                                           static_cast<uint64_t>(state.timestamp.batch));
  std::vector<std::string> out(prompts.size());
  const auto scope = state.strategy->enter(dist::Phase::EVAL_FORWARD);  // a sharded model gathers its parameters
  const auto autocast = enter_autocast(state.precision, state.device);
  for (const auto& [length, members] : by_length) {
    for (size_t start = 0; start < members.size(); start += batch_size) {
      const size_t end = std::min(members.size(), start + batch_size);
      std::vector<int64_t> flat;
      for (size_t m = start; m < end; ++m)
        flat.insert(flat.end(), encoded[members[m]].begin(), encoded[members[m]].end());
      const at::Tensor ids = at::tensor(flat, at::TensorOptions().dtype(at::kLong))
                                 .view({static_cast<int64_t>(end - start), static_cast<int64_t>(length)})
                                 .to(state.device);
      const at::Tensor result =
          models::generate_tokens(lm.model(), ids, generation, generator).slice(1, static_cast<int64_t>(length)).cpu();
      for (size_t m = start; m < end; ++m) {
        const at::Tensor row = result[static_cast<int64_t>(m - start)].contiguous();
        std::vector<int64_t> tokens(row.data_ptr<int64_t>(), row.data_ptr<int64_t>() + row.numel());
        if (tokenizer.eos_token())  // skip_special_tokens
          tokens.erase(std::remove(tokens.begin(), tokens.end(), *tokenizer.eos_token()), tokens.end());
        out[members[m]] = tokenizer.decode(tokens);
      }
    }
  }
  return out;
}

}  // namespace composer
