// Generate: text from prompts at an interval, logged as a table (Composer's Generate callback).
#pragma once

#include "composer/core/callback.h"
#include "composer/core/fields.h"
#include "composer/core/interval.h"
#include "composer/core/time.h"
#include "composer/models/generation.h"

#include <torch/arg.h>

#include <optional>
#include <string>
#include <vector>

namespace composer {

struct GenerateOptions {
  /// Required: the prompts to continue.
  TORCH_ARG(Required<std::vector<std::string>>, prompts);
  /// Required: how often to generate (a bare integer counts epochs; units ep, ba, sp, tok, dur).
  TORCH_ARG(Required<Time>, interval);
  /// Prompts per forward batch; unset: all of them.
  TORCH_ARG(std::optional<int64_t>, batch_size) = std::nullopt;
  /// How to generate (Hugging Face generate()'s arguments; the end-of-text token comes from the tokenizer).
  TORCH_ARG(models::GenerationOptions, generation) = {};
  /// Seeds the sampling generator (with the batch number), which leaves the training's random state untouched.
  TORCH_ARG(int64_t, seed) = 0;

 public:
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("prompts", self.prompts_, "required: the prompts to continue");
    visit("interval", ensure_time(TimeUnit::EPOCH, self.interval_), "required: how often to generate");
    visit("batch_size", self.batch_size_, "prompts per forward batch (default: all)");
    models::GenerationOptions::for_each_field(self.generation_, visit);
    visit("seed", self.seed_, "seed of the sampling generator");
  }
};

/// At every multiple of `interval` (at BATCH_CHECKPOINT / EPOCH_CHECKPOINT, as Composer's interval scheduler with
/// checkpoint events, and at the end of training), once per batch: the prompts are tokenized with the model's
/// tokenizer, grouped by token length into batches of at most batch_size (so no padding changes what a prompt
/// generates), continued by models::generate_tokens under the run's precision, and rank 0 logs the table
/// "generations" with columns prompt, generation (the new tokens decoded, the end-of-text token dropped). Every rank
/// generates (a sharded model gathers its parameters for it).
/// Requires: a ComposerLanguageModel (not masked) with a tokenizer (set_tokenizer; the CLI sets the data's).
class Generate : public Callback {
 public:
  /// Throws std::invalid_argument naming the field: no prompts, an empty prompt, a missing interval, batch_size
  /// below 1, or a bad generation option.
  explicit Generate(GenerateOptions options);
  void run_event(Event event, State& state, Logger& logger) override;
  /// The generations of `options().prompts()` by the state's model now, in prompt order.
  std::vector<std::string> generate(State& state);
  const GenerateOptions& options() const { return options_; }

 private:
  GenerateOptions options_;
  IntervalScheduler check_interval_;
  std::optional<int64_t> last_generate_batch_;
};

}  // namespace composer
