// SeqLengthWarmup: trains on short sequences first and lengthens them during the first part of training (Composer's
// SeqLengthWarmup, "curriculum learning" for language models).
#pragma once

#include "composer/core/algorithm.h"
#include "composer/data/batch.h"

#include <torch/arg.h>

namespace composer {
namespace functional {

/// Composer's set_batch_sequence_length: the batch with sequences of `seq_len` tokens. The batch's sequence length is
/// dimension 1 of its first field with two or more dimensions; a batch no longer than seq_len is returned as it is.
/// truncate: every field is cut to its first seq_len positions (with preserve_end_of_sequence, each row's last
/// attended token, from "attention_mask", is written at the row's new last attended position). Otherwise the tokens
/// are reshaped into more, shorter rows (the leftover tail dropped): every field must have input_ids' shape.
/// Throws std::invalid_argument naming the field when the batch does not allow it.
Batch set_batch_sequence_length(const Batch& batch, int64_t seq_len, bool truncate = true,
                                bool preserve_end_of_sequence = false);

/// Composer's schedule: the length at `batch` of a run of `total_batches` that warms up over `duration` of it, from
/// min_seq_length to max_seq_length in steps of step_size (then max_seq_length). Where Composer divides by zero
/// (max == min, or fewer warmup batches than steps) this returns max_seq_length.
int64_t warmup_sequence_length(int64_t batch, int64_t total_batches, double duration, int64_t min_seq_length,
                               int64_t max_seq_length, int64_t step_size);

}  // namespace functional

namespace algorithms {

struct SeqLengthWarmupOptions {
  /// Fraction of training over which the length grows, in [0, 1].
  TORCH_ARG(double, duration) = 0.3;
  TORCH_ARG(int64_t, min_seq_length) = 8;
  TORCH_ARG(int64_t, max_seq_length) = 1024;
  /// Tokens added per increment (a multiple of 8 suits tensor cores).
  TORCH_ARG(int64_t, step_size) = 8;
  /// Cut the sequences (true) or reshape their tokens into more, shorter sequences (false).
  TORCH_ARG(bool, truncate) = true;
  /// Keep each row's last token (by attention_mask) when truncating.
  TORCH_ARG(bool, preserve_end_of_sequence) = false;

 public:
  void validate() const;
  /// The field list: repr, YAML and repr parsing, hyperparameter logging and the docs table (core/fields.h).
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("duration", self.duration_, "fraction of training over which the length grows, in [0, 1]");
    visit("min_seq_length", self.min_seq_length_, "sequence length at the start");
    visit("max_seq_length", self.max_seq_length_, "sequence length at the end of the warmup");
    visit("step_size", self.step_size_, "tokens added per increment");
    visit("truncate", self.truncate_, "cut the sequences (True) or reshape them into more, shorter ones (False)");
    visit("preserve_end_of_sequence", self.preserve_end_of_sequence_,
          "keep each row's last token (by attention_mask) when truncating");
  }
};

/// AFTER_DATALOADER: sets the batch's sequence length from the schedule (max_duration in ep or ba) and logs
/// seq_length_warmup/curr_seq_len and seq_length_warmup/curr_bs. The samples and tokens counted into the timestamp
/// are the changed batch's. The first time, a forward and backward pass on the batch cut to max_seq_length (and to
/// the microbatch size) reserves the memory of the longest sequences, as Composer does; its gradients are zeroed.
/// Matches INIT too (Composer checks the model there); the batch needs an "input_ids" field.
class SeqLengthWarmup : public Algorithm {
 public:
  explicit SeqLengthWarmup(SeqLengthWarmupOptions options = {});
  bool match(Event event, const State& state) override;
  std::optional<int> apply(Event event, State& state, Logger& logger) override;
  std::string repr() const override;
  const SeqLengthWarmupOptions& options() const { return options_; }

 private:
  void activate(State& state);
  SeqLengthWarmupOptions options_;
  bool initialized_ = false;
  bool activated_ = false;
};

}  // namespace algorithms
}  // namespace composer
