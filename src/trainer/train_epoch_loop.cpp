#include "composer/trainer/train_epoch_loop.h"

#include "composer/core/engine.h"
#include "composer/core/logger.h"
#include "composer/core/state.h"
#include "composer/dist/env.h"
#include "composer/metrics/metric.h"
#include "composer/optim/optimizer.h"
#include "composer/optim/scheduler.h"
#include "composer/trainer/eval_loop.h"
#include "composer/trainer/train_step.h"
#include "trainer/detail/batch_agreement.h"
#include "trainer/detail/global_metric.h"

#include <torch/torch.h>

#include <cmath>
#include <iostream>

namespace composer {
namespace {

using Clock = std::chrono::steady_clock;

// Composer's iterations: iteration_length epochs or tokens, then ITERATION_END and ITERATION_CHECKPOINT.
bool iteration_complete(const State& s, TimeUnit unit) {
  if (!s.iteration_length || s.iteration_length->unit() != unit) return false;
  const int64_t done = unit == TimeUnit::EPOCH ? s.timestamp.epoch_in_iteration : s.timestamp.token_in_iteration;
  return done >= s.iteration_length->int_value();
}

void warn_once_if_nonfinite(State& s, double loss) {
  if (std::isfinite(loss) || s.nonfinite_loss_batch) return;
  s.nonfinite_loss_batch = s.timestamp.batch + 1;
  if (dist::get_global_rank() == 0) {
    std::cerr << "composer: warning: the training loss is " << loss << " at batch " << *s.nonfinite_loss_batch
              << "; the weights are likely NaN from here on (check the learning rate, weight decay and precision)\n";
  }
}

}  // namespace

TrainEpochLoop::TrainEpochLoop(State& state, Engine& engine, Logger& logger, TrainStep& step, EvalLoop& eval,
                               TrainEpochLoopOptions options)
    : state_(state), engine_(engine), logger_(logger), step_(step), eval_(eval), options_(options) {}

void TrainEpochLoop::step_schedulers() {
  if (!state_.optimizer || state_.schedulers.empty()) return;
  // Captured once, before any schedule has changed a group's lr; a resumed run has them from its checkpoint.
  if (state_.scheduler_base_lrs.empty()) state_.scheduler_base_lrs = optim::initial_lrs(*state_.optimizer);
  apply_schedulers(state_, state_.scheduler_base_lrs, options_.scale_schedule_ratio());
}

void TrainEpochLoop::log_train_metrics() {
  std::map<std::string, double> values;
  for (auto& [name, m] : state_.train_metrics) {
    const double v = detail::compute_global(*m, *state_.strategy);
    values["metrics/train/" + name] = v;
    state_.train_metric_values[name] = v;
  }
  if (!values.empty()) logger_.log_metrics(values);
}

void TrainEpochLoop::log_batch_time() {
  const Timestamp& ts = state_.timestamp;
  std::map<std::string, double> m{{"time/batch", double(ts.batch)},
                                  {"time/sample", double(ts.sample)},
                                  {"time/batch_in_epoch", double(ts.batch_in_epoch)},
                                  {"time/sample_in_epoch", double(ts.sample_in_epoch)}};
  if (ts.token > 0) {
    m["time/token"] = double(ts.token);
    m["time/token_in_epoch"] = double(ts.token_in_epoch);
  }
  logger_.log_metrics(m);
}

// One batch: events, the optimisation step, loss and metric logging, schedulers, timestamp.
void TrainEpochLoop::run_batch(Batch batch, Clock::time_point& last_batch_end) {
  State& s = state_;
  const DataLoader& loader = *s.train_dataloader;
  s.batch = loader.transform_batch(std::move(batch)).to(s.device);
  dist::BatchTotals local;  // counted before AFTER_DATALOADER, as Composer counts them
  local.samples = std::llround(loader.num_samples_in_batch(s.batch));
  local.tokens = loader.num_tokens_in_batch(s.batch, TokenType::kTotal);
  engine_.run_event(Event::AFTER_DATALOADER);
  engine_.run_event(Event::BATCH_START);
  log_batch_time();
  for (const auto& [name, loss] : step_.run()) local.losses[name] = loss.item<double>();
  const dist::BatchTotals totals = s.strategy->reduce_batch(local);  // one collective: losses, samples, tokens
  s.total_loss_dict.clear();
  for (const auto& [name, value] : totals.losses) s.total_loss_dict["loss/train/" + name] = value;
  warn_once_if_nonfinite(s, totals.losses.at("total"));
  logger_.log_metrics(s.total_loss_dict);
  if (options_.step_schedulers_every_batch()) step_schedulers();
  log_train_metrics();
  const auto now = Clock::now();
  const Seconds batch_time = std::chrono::duration_cast<Seconds>(now - last_batch_end);
  last_batch_end = now;
  s.previous_timestamp = s.timestamp;
  s.timestamp = s.timestamp.to_next_batch(totals.samples, totals.tokens, batch_time);
  engine_.run_event(Event::BATCH_END);
  const auto eval_start = Clock::now();
  eval_.run_due(Event::BATCH_END);
  last_batch_end += Clock::now() - eval_start;  // evaluation time is not training time
  engine_.run_event(Event::BATCH_CHECKPOINT);
}

void TrainEpochLoop::end_iteration() {
  State& s = state_;
  s.previous_timestamp = s.timestamp;
  s.timestamp = s.timestamp.to_next_iteration();
  engine_.run_event(Event::ITERATION_END);
  engine_.run_event(Event::ITERATION_CHECKPOINT);
}

void TrainEpochLoop::run() {
  State& s = state_;
  if (!s.train_dataloader || !s.max_duration) {
    throw std::invalid_argument("TrainEpochLoop.run: state.train_dataloader and state.max_duration must be set");
  }
  if (s.timestamp.epoch_in_iteration == 0 && s.timestamp.batch_in_epoch == 0) engine_.run_event(Event::ITERATION_START);
  if (s.timestamp.batch_in_epoch == 0) {
    engine_.run_event(Event::EPOCH_START);
    logger_.log_metrics({{"time/epoch", double(s.timestamp.epoch)}});
    for (auto& [name, m] : s.train_metrics) m->reset();
  }
  DataLoader& loader = *s.train_dataloader;
  loader.set_epoch(s.timestamp.epoch);
  loader.reset();
  if (s.timestamp.batch_in_epoch > 0) loader.resume(s.timestamp.batch_in_epoch, s.timestamp.sample_in_epoch);
  bool finished_early = false;
  int64_t batches = 0;
  auto last_batch_end = Clock::now();
  // BEFORE_DATALOADER fires before every next(), including the one that finds the loader exhausted; a subset
  // (train_subset_num_batches) stops before asking for more.
  const auto full_len = loader.length();
  const bool subset = s.dataloader_len && (!full_len || *s.dataloader_len < *full_len);
  while (!subset || s.timestamp.batch_in_epoch < *s.dataloader_len) {
    engine_.run_event(Event::BEFORE_DATALOADER);
    auto batch = loader.next();
    if (!detail::every_rank_has_batch(*s.strategy, batch.has_value(), "train", s.timestamp.batch_in_epoch)) break;
    run_batch(std::move(*batch), last_batch_end);
    ++batches;
    const bool iteration_done = iteration_complete(s, TimeUnit::TOKEN);
    if (s.timestamp >= *s.max_duration || iteration_done) {
      if (iteration_done) end_iteration();  // resets the *_in_epoch counters: the next pass starts the data afresh
      finished_early = true;
      break;
    }
  }
  if (batches == 0 && s.timestamp.batch_in_epoch == 0) {
    throw std::runtime_error("the training dataloader yielded no batch in epoch " + std::to_string(s.timestamp.epoch));
  }
  if (finished_early && s.dataloader_len != s.timestamp.batch_in_epoch) return;
  log_train_metrics();
  if (!options_.step_schedulers_every_batch()) step_schedulers();
  s.previous_timestamp = s.timestamp;
  s.timestamp = s.timestamp.to_next_epoch();
  engine_.run_event(Event::EPOCH_END);
  eval_.run_due(Event::EPOCH_END);
  engine_.run_event(Event::EPOCH_CHECKPOINT);
  if (iteration_complete(s, TimeUnit::EPOCH)) end_iteration();
}

}  // namespace composer
