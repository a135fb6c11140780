#include "trainer/detail/fit_loop.h"

#include "composer/checkpoint/checkpoint.h"
#include "composer/core/algorithm.h"
#include "composer/dist/dist.h"
#include "composer/dist/env.h"
#include "composer/metrics/metric.h"
#include "composer/models/composer_model.h"
#include "composer/optim/scheduler.h"
#include "trainer/detail/eval_loop.h"
#include "trainer/detail/global_metric.h"
#include "trainer/detail/train_step.h"

#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <iostream>

namespace composer::detail {
namespace {

using Clock = std::chrono::steady_clock;

void log_train_metrics(TrainerImpl& t) {
  std::map<std::string, double> values;
  for (auto& [name, m] : t.state.train_metrics) {
    const double v = compute_global(*m);
    values["metrics/train/" + name] = v;
    t.state.train_metric_values[name] = v;
  }
  if (!values.empty()) t.logger.log_metrics(values);
}

void log_batch_time(TrainerImpl& t) {
  const Timestamp& ts = t.state.timestamp;
  std::map<std::string, double> m{{"time/batch", double(ts.batch)},
                                  {"time/sample", double(ts.sample)},
                                  {"time/batch_in_epoch", double(ts.batch_in_epoch)},
                                  {"time/sample_in_epoch", double(ts.sample_in_epoch)}};
  if (ts.token > 0) {
    m["time/token"] = double(ts.token);
    m["time/token_in_epoch"] = double(ts.token_in_epoch);
  }
  t.logger.log_metrics(m);
}

// One batch: events, the optimisation step, loss and metric logging, schedulers, timestamp.
void run_batch(TrainerImpl& t, Batch batch, Clock::time_point& last_batch_end) {
  State& s = t.state;
  s.batch = batch.to(s.device);
  t.engine.run_event(Event::AFTER_DATALOADER);
  t.engine.run_event(Event::BATCH_START);
  log_batch_time(t);
  const int64_t local_samples = s.batch.num_samples();
  const int64_t local_tokens = s.batch.num_tokens();
  const at::Tensor loss = run_train_step(t, s.device_train_microbatch_size);
  double loss_value = loss.defined() ? loss.item<double>() : 0.0;
  int64_t samples = local_samples, tokens = local_tokens;
  if (dist::get_world_size() > 1) {  // one all-reduce: the loss averaged over ranks, samples and tokens summed
    at::Tensor reduced = at::tensor({loss_value, double(local_samples), double(local_tokens)}, at::kDouble);
    dist::all_reduce(reduced);
    const auto r = reduced.accessor<double, 1>();
    loss_value = r[0] / static_cast<double>(dist::get_world_size());
    samples = static_cast<int64_t>(r[1]);
    tokens = static_cast<int64_t>(r[2]);
  }
  s.total_loss_dict["loss/train/total"] = loss_value;
  if (!std::isfinite(loss_value) && !s.nonfinite_loss_batch) {
    s.nonfinite_loss_batch = s.timestamp.batch + 1;
    if (dist::get_global_rank() == 0) {
      std::cerr << "composer: warning: the training loss is " << loss_value << " at batch " << *s.nonfinite_loss_batch
                << "; the weights are likely NaN from here on (check the learning rate, weight decay and precision)\n";
    }
  }
  t.logger.log_metrics({{"loss/train/total", loss_value}});
  if (t.options.step_schedulers_every_batch()) apply_schedulers(s, t.base_lrs, t.options.scale_schedule_ratio());
  log_train_metrics(t);
  const auto now = Clock::now();
  const Seconds batch_time = std::chrono::duration_cast<Seconds>(now - last_batch_end);
  last_batch_end = now;
  s.previous_timestamp = s.timestamp;
  s.timestamp = s.timestamp.to_next_batch(samples, tokens, batch_time);
  t.engine.run_event(Event::BATCH_END);
  const auto eval_start = Clock::now();
  run_due_evaluators(t, Event::BATCH_END);
  last_batch_end += Clock::now() - eval_start;  // evaluation time is not training time
  t.engine.run_event(Event::BATCH_CHECKPOINT);
}

// Composer's iterations: iteration_length epochs or tokens, then ITERATION_END and ITERATION_CHECKPOINT.
bool iteration_complete(const State& s, TimeUnit unit) {
  if (!s.iteration_length || s.iteration_length->unit() != unit) return false;
  const int64_t done = unit == TimeUnit::EPOCH ? s.timestamp.epoch_in_iteration : s.timestamp.token_in_iteration;
  return done >= s.iteration_length->int_value();
}

void end_iteration(TrainerImpl& t) {
  State& s = t.state;
  s.previous_timestamp = s.timestamp;
  s.timestamp = s.timestamp.to_next_iteration();
  t.engine.run_event(Event::ITERATION_END);
  t.engine.run_event(Event::ITERATION_CHECKPOINT);
}

// One pass over the training data (or the rest of it, after a mid-epoch resume).
void run_epoch(TrainerImpl& t) {
  State& s = t.state;
  if (s.timestamp.epoch_in_iteration == 0 && s.timestamp.batch_in_epoch == 0) t.engine.run_event(Event::ITERATION_START);
  if (s.timestamp.batch_in_epoch == 0) {
    t.engine.run_event(Event::EPOCH_START);
    t.logger.log_metrics({{"time/epoch", double(s.timestamp.epoch)}});
    for (auto& [name, m] : s.train_metrics) m->reset();
  }
  DataLoader& loader = *s.train_dataloader;
  loader.set_epoch(s.timestamp.epoch);
  loader.reset();
  if (s.timestamp.batch_in_epoch > 0) loader.skip(s.timestamp.batch_in_epoch);
  bool finished_early = false;
  int64_t batches = 0;
  auto last_batch_end = Clock::now();
  // BEFORE_DATALOADER fires before every next(), including the one that finds the loader exhausted; a subset
  // (train_subset_num_batches) stops before asking for more.
  const auto full_len = loader.length();
  const bool subset = s.dataloader_len && (!full_len || *s.dataloader_len < *full_len);
  while (!subset || s.timestamp.batch_in_epoch < *s.dataloader_len) {
    t.engine.run_event(Event::BEFORE_DATALOADER);
    auto batch = loader.next();
    if (!batch) break;
    run_batch(t, std::move(*batch), last_batch_end);
    ++batches;
    const bool iteration_done = iteration_complete(s, TimeUnit::TOKEN);
    if (s.timestamp >= *s.max_duration || iteration_done) {
      if (iteration_done) end_iteration(t);  // resets the *_in_epoch counters: the next pass starts the data afresh
      finished_early = true;
      break;
    }
  }
  if (batches == 0 && s.timestamp.batch_in_epoch == 0) {
    throw std::runtime_error("the training dataloader yielded no batch in epoch " + std::to_string(s.timestamp.epoch));
  }
  if (finished_early && s.dataloader_len != s.timestamp.batch_in_epoch) return;
  log_train_metrics(t);
  if (!t.options.step_schedulers_every_batch()) apply_schedulers(s, t.base_lrs, t.options.scale_schedule_ratio());
  s.previous_timestamp = s.timestamp;
  s.timestamp = s.timestamp.to_next_epoch();
  t.engine.run_event(Event::EPOCH_END);
  run_due_evaluators(t, Event::EPOCH_END);
  t.engine.run_event(Event::EPOCH_CHECKPOINT);
  if (iteration_complete(s, TimeUnit::EPOCH)) end_iteration(t);
}

}  // namespace

void run_fit_loop(TrainerImpl& t) {
  State& s = t.state;
  nlohmann::json enabled;
  for (const auto& a : s.algorithms) enabled["enabled_algorithms/" + a->name()] = true;
  if (!enabled.empty()) t.logger.log_hyperparameters(enabled);
  s.set_dataloader(s.train_dataloader.get(), t.options.train_dataloader_label(), t.options.train_subset_num_batches());
  t.engine.run_event(Event::FIT_START);
  if (t.pending_rng) {
    restore_rng(*t.pending_rng, dist::get_global_rank());
    t.pending_rng.reset();
  }
  s.model->train();
  if (s.timestamp.batch == 0) apply_schedulers(s, t.base_lrs, t.options.scale_schedule_ratio());
  while (s.timestamp < *s.max_duration) run_epoch(t);
  // Composer's final time values: the epoch and the batch-level counters.
  t.logger.log_metrics({{"time/epoch", double(s.timestamp.epoch)}});
  log_batch_time(t);
  t.engine.run_event(Event::FIT_END);
  run_due_evaluators(t, Event::FIT_END);
  for (auto& group : s.optimizer->param_groups())
    for (auto& p : group.params())
      if (p.grad().defined()) p.mutable_grad().reset();
}

}  // namespace composer::detail
