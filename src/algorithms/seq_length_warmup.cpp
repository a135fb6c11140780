#include "composer/algorithms/seq_length_warmup.h"

#include "algorithms/detail/common.h"
#include "composer/core/fields.h"
#include "composer/core/logger.h"
#include "composer/core/state.h"
#include "composer/models/composer_model.h"

#include <torch/optim/optimizer.h>
#include <torch/torch.h>

#include <stdexcept>

namespace composer {
namespace functional {
namespace {

std::string shape_of(const at::Tensor& t) { return c10::str(t.sizes()); }

}  // namespace

Batch set_batch_sequence_length(const Batch& batch, int64_t seq_len, bool truncate, bool preserve_end_of_sequence) {
  if (seq_len <= 0) {
    throw std::invalid_argument("set_batch_sequence_length: seq_len must be positive, got " + std::to_string(seq_len));
  }
  int64_t batch_seq_len = 0;
  for (const auto& [key, t] : batch.fields()) {
    if (t.defined() && t.dim() > 1) {
      batch_seq_len = t.size(1);
      break;
    }
  }
  if (seq_len >= batch_seq_len) return batch;
  std::vector<std::pair<std::string, at::Tensor>> out;
  if (truncate) {
    at::Tensor rows, eos, eos_truncated;
    if (preserve_end_of_sequence) {
      if (!batch.has("attention_mask")) {
        throw std::invalid_argument(
            "set_batch_sequence_length: preserve_end_of_sequence needs an 'attention_mask' field in the batch");
      }
      const at::Tensor& mask = batch.at(std::string("attention_mask"));
      rows = at::arange(mask.size(0), mask.options().dtype(at::kLong));
      eos = mask.sum(1).to(at::kLong) - 1;
      eos_truncated = eos.clamp_max(seq_len - 1);
    }
    for (const auto& [key, t] : batch.fields()) {
      if (!t.defined() || t.dim() < 2) {
        throw std::invalid_argument("set_batch_sequence_length: truncating needs every field sequence-shaped; '" + key +
                                    "' has shape " + (t.defined() ? shape_of(t) : std::string("(none)")));
      }
      at::Tensor cut = t.narrow(1, 0, seq_len).contiguous();
      if (preserve_end_of_sequence) cut.index_put_({rows, eos_truncated}, t.index({rows, eos}));
      out.emplace_back(key, cut);
    }
    return Batch(std::move(out));
  }
  if (!batch.has("input_ids")) {
    throw std::invalid_argument("set_batch_sequence_length: reshaping (truncate false) needs an 'input_ids' field");
  }
  const at::Tensor& ids = batch.at(std::string("input_ids"));
  const int64_t kept = ids.numel() / seq_len * seq_len;
  for (const auto& [key, t] : batch.fields()) {
    if (!t.defined() || t.sizes() != ids.sizes()) {
      throw std::invalid_argument("set_batch_sequence_length: reshaping needs every field shaped like input_ids " +
                                  shape_of(ids) + "; '" + key + "' has shape " +
                                  (t.defined() ? shape_of(t) : std::string("(none)")));
    }
    out.emplace_back(key, t.reshape({-1}).narrow(0, 0, kept).view({-1, seq_len}));
  }
  return Batch(std::move(out));
}

int64_t warmup_sequence_length(int64_t batch, int64_t total_batches, double duration, int64_t min_seq_length,
                               int64_t max_seq_length, int64_t step_size) {
  const auto warmup_batches = static_cast<int64_t>(static_cast<double>(total_batches) * duration);
  const int64_t increments = (max_seq_length - min_seq_length) / step_size;
  if (increments <= 0 || warmup_batches / increments == 0) return max_seq_length;
  const int64_t length = step_size * (batch / (warmup_batches / increments)) + min_seq_length;
  return std::min(std::max(length, min_seq_length), max_seq_length);
}

}  // namespace functional

namespace algorithms {

void SeqLengthWarmupOptions::validate() const {
  detail::require_range("SeqLengthWarmup", "duration", duration_, 0.0, 1.0);
  if (min_seq_length_ < 1) detail::bad_option("SeqLengthWarmup", "min_seq_length", ">= 1", min_seq_length_);
  if (step_size_ < 1) detail::bad_option("SeqLengthWarmup", "step_size", ">= 1", step_size_);
  if (max_seq_length_ < min_seq_length_) {
    throw std::invalid_argument("SeqLengthWarmup.max_seq_length " + std::to_string(max_seq_length_) +
                                " must be >= min_seq_length " + std::to_string(min_seq_length_));
  }
}

SeqLengthWarmup::SeqLengthWarmup(SeqLengthWarmupOptions options) : options_(std::move(options)) { options_.validate(); }

bool SeqLengthWarmup::match(Event event, const State&) {
  return (event == Event::INIT && !initialized_) || event == Event::AFTER_DATALOADER;
}

// Composer's _activate_model: a forward and backward pass at the longest length, so that the memory for it is
// reserved before the lengths grow; the gradients are zeroed afterwards.
void SeqLengthWarmup::activate(State& state) {
  if (!state.model) return;
  std::vector<std::pair<std::string, at::Tensor>> fields;
  const int64_t microbatch = state.device_train_microbatch_size;
  for (const auto& [key, t] : state.batch.fields()) {
    if (!t.defined() || t.dim() < 2) {
      throw std::invalid_argument("SeqLengthWarmup needs every batch field sequence-shaped; '" + key + "' has shape " +
                                  (t.defined() ? c10::str(t.sizes()) : std::string("(none)")));
    }
    at::Tensor cut = t.narrow(1, 0, std::min(t.size(1), options_.max_seq_length()));
    if (microbatch > 0) cut = cut.narrow(0, 0, std::min(microbatch, cut.size(0)));
    fields.emplace_back(key, cut.clone());
  }
  const Batch inputs(std::move(fields));
  const at::Tensor outputs = state.model->forward(inputs);
  const auto losses = state.model->losses(outputs, inputs);
  at::Tensor total;
  if (losses.count("total")) {
    total = losses.at("total");
  } else {
    for (const auto& [name, loss] : losses) total = total.defined() ? total + loss.mean() : loss.mean();
  }
  total.backward();
  if (state.optimizer) state.optimizer->zero_grad();
  activated_ = true;
}

std::optional<int> SeqLengthWarmup::apply(Event event, State& state, Logger& logger) {
  if (event == Event::INIT) {
    initialized_ = true;
    return std::nullopt;
  }
  if (!state.batch.has("input_ids")) {
    throw std::invalid_argument("SeqLengthWarmup needs token batches with an 'input_ids' field (fields: " + [&] {
      std::string k;
      for (const auto& key : state.batch.keys()) k += (k.empty() ? "" : ", ") + key;
      return k;
    }() + ")");
  }
  if (!activated_) activate(state);
  int64_t total_batches = 0;
  if (state.max_duration->unit() == TimeUnit::EPOCH) {
    if (!state.dataloader_len) throw std::invalid_argument("SeqLengthWarmup needs a dataloader with a length");
    total_batches = *state.dataloader_len * static_cast<int64_t>(state.max_duration->value());
  } else if (state.max_duration->unit() == TimeUnit::BATCH) {
    total_batches = static_cast<int64_t>(state.max_duration->value());
  } else {
    throw std::invalid_argument("SeqLengthWarmup needs max_duration in epochs or batches (as in Composer), got " +
                                state.max_duration->to_string());
  }
  // Composer divides by zero here; a warmup shorter than its length steps is an error naming why.
  const auto warmup_batches = static_cast<int64_t>(static_cast<double>(total_batches) * options_.duration());
  const int64_t steps = (options_.max_seq_length() - options_.min_seq_length()) / options_.step_size();
  if (steps > 0 && warmup_batches < steps) {
    throw std::invalid_argument(
        "SeqLengthWarmup: duration " + std::to_string(options_.duration()) + " of " + std::to_string(total_batches) +
        " batches is " + std::to_string(warmup_batches) + " warmup batches, fewer than the " + std::to_string(steps) +
        " length steps from min_seq_length " + std::to_string(options_.min_seq_length()) + " to max_seq_length " +
        std::to_string(options_.max_seq_length()) + " in steps of " + std::to_string(options_.step_size()) +
        "; raise duration or step_size, or train longer");
  }
  const int64_t length =
      functional::warmup_sequence_length(state.timestamp.batch, total_batches, options_.duration(),
                                         options_.min_seq_length(), options_.max_seq_length(), options_.step_size());
  state.batch = functional::set_batch_sequence_length(state.batch, length, options_.truncate(),
                                                      options_.preserve_end_of_sequence());
  logger.log_metrics(
      {{"seq_length_warmup/curr_seq_len", static_cast<double>(length)},
       {"seq_length_warmup/curr_bs", static_cast<double>(state.batch.at(std::string("input_ids")).size(0))}});
  return std::nullopt;
}

std::string SeqLengthWarmup::repr() const { return options_repr("SeqLengthWarmup", options_); }

}  // namespace algorithms
}  // namespace composer
