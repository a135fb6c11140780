#include "composer/trainer/trainer_options.h"

#include "composer/core/algorithm.h"
#include "composer/core/hparams.h"

#include <cmath>
#include <cstdlib>
#include <sstream>
#include <stdexcept>

namespace composer {

MicrobatchSize MicrobatchSize::fraction(double samples) {
  if (!(samples > 0) || !std::isfinite(samples)) {
    throw std::invalid_argument("device_train_microbatch_size " + std::to_string(samples) +
                                " must be a positive number of samples");
  }
  MicrobatchSize m;
  m.fractional = samples;
  return m;
}

MicrobatchSize MicrobatchSize::parse(const std::string& text) {
  if (text == "auto") return automatic();
  const std::string expected = "device_train_microbatch_size '" + text + "' must be a positive number or 'auto'";
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (!text.empty() && *end == '\0') {
    if (v <= 0) throw std::invalid_argument(expected);
    return MicrobatchSize(static_cast<int64_t>(v));
  }
  const double d = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !(d > 0) || !std::isfinite(d)) throw std::invalid_argument(expected);
  if (d == std::floor(d) && d < 9.0e18) return MicrobatchSize(static_cast<int64_t>(d));
  return fraction(d);
}

std::string field_text(const MicrobatchSize& m) {
  if (m.is_auto) return "'auto'";
  if (m.fractional > 0) {
    std::ostringstream out;
    out << m.fractional;
    return out.str();
  }
  return m.value > 0 ? std::to_string(m.value) : "None";
}

void read_field(Hparams& h, const std::string& key, MicrobatchSize& m) {
  if (!h.has(key)) return;
  try {
    m = MicrobatchSize::parse(h.get_string(key, ""));
  } catch (const std::invalid_argument& e) {
    h.error(key, e.what());
  }
}

TrainerOptions& TrainerOptions::max_duration(const std::string& text) {
  max_duration_ = Time::from_input(text, TimeUnit::EPOCH);
  return *this;
}

TrainerOptions& TrainerOptions::eval_interval(const std::string& text) {
  return eval_interval(Time::from_input(text, TimeUnit::EPOCH));
}

TrainerOptions& TrainerOptions::save_interval(const std::string& text) {
  return save_interval(Time::from_input(text, TimeUnit::EPOCH));
}

TrainerOptions& TrainerOptions::eval_dataloader(std::shared_ptr<DataLoader> loader) {
  Evaluator e;
  e.label = "eval";
  e.dataloader = std::move(loader);
  evaluators_.push_back(std::move(e));
  return *this;
}

void TrainerOptions::validate() const {
  if (!model_) throw std::invalid_argument("TrainerOptions.model must be set");
  if (max_duration_) {
    const TimeUnit u = max_duration_->unit();
    if (u == TimeUnit::DURATION || u == TimeUnit::SECOND) {
      throw std::invalid_argument("TrainerOptions.max_duration '" + max_duration_->to_string() +
                                  "' must be in ep, ba, sp, tok or iter (not dur or sec)");
    }
    if (max_duration_->value() <= 0) {
      throw std::invalid_argument("TrainerOptions.max_duration must be positive, got '" + max_duration_->to_string() +
                                  "'");
    }
  }
  if (iteration_length_) {
    const TimeUnit u = iteration_length_->unit();
    if ((u != TimeUnit::EPOCH && u != TimeUnit::TOKEN) || iteration_length_->value() <= 0) {
      throw std::invalid_argument("TrainerOptions.iteration_length '" + iteration_length_->to_string() +
                                  "' must be a positive number of epochs or tokens (e.g. '2ep', '1000000tok')");
    }
  }
  if (max_duration_ && max_duration_->unit() == TimeUnit::ITERATION && !iteration_length_) {
    throw std::invalid_argument(
        "TrainerOptions.max_duration '" + max_duration_->to_string() +
        "' is in iterations, which never end without iteration_length (epochs or tokens per iteration)");
  }
  if (train_subset_num_batches() == 0 || train_subset_num_batches() < -1) {
    throw std::invalid_argument("TrainerOptions.train_subset_num_batches must be -1 (all) or >= 1, got " +
                                std::to_string(train_subset_num_batches()) + " (an epoch of no batches never ends)");
  }
  if (scale_schedule_ratio() <= 0) {
    throw std::invalid_argument("TrainerOptions.scale_schedule_ratio must be > 0, got " +
                                std::to_string(scale_schedule_ratio()));
  }
  if (device_train_microbatch_size_.value < 0) {
    throw std::invalid_argument("TrainerOptions.device_train_microbatch_size must be positive, got " +
                                std::to_string(device_train_microbatch_size_.value));
  }
  if (device_train_microbatch_size_.is_auto && profiler_) {
    throw std::invalid_argument(
        "TrainerOptions.device_train_microbatch_size 'auto' cannot run with the profiler (as in Composer): find the "
        "size with a short 'auto' run, then profile with that number");
  }
  for (const auto& e : evaluators_) {
    if (!e.dataloader) throw std::invalid_argument("Evaluator '" + e.label + "' has no dataloader");
    if (e.label.empty()) throw std::invalid_argument("every Evaluator needs a non-empty label");
  }
  if (!save_folder().empty()) save().validate();  // an unknown object store, a bad interval: before any work
  if (autoresume() && save_folder().empty()) {
    throw std::invalid_argument("TrainerOptions.autoresume needs save_folder (where to look for checkpoints)");
  }
  parallelism_config_.validate();
  if (console_log_interval_.unit() != TimeUnit::BATCH && console_log_interval_.unit() != TimeUnit::EPOCH) {
    throw std::invalid_argument("TrainerOptions.console_log_interval '" + console_log_interval_.to_string() +
                                "' must be in ba or ep");
  }
}

}  // namespace composer
