#include "composer/trainer/train_step.h"

#include "composer/core/algorithm.h"
#include "composer/core/engine.h"
#include "composer/core/logger.h"
#include "composer/core/state.h"
#include "composer/dist/env.h"
#include "composer/metrics/metric.h"
#include "composer/models/composer_model.h"
#include "composer/optim/closure.h"
#include "composer/optim/grad_scaler.h"
#include "composer/utils/error_text.h"
#include "composer/utils/reproducibility.h"
#include "trainer/detail/forward_inputs.h"

#include <torch/torch.h>

#include <iostream>
#include <stdexcept>

namespace composer {
namespace {

bool backwards_create_graph(const State& s) {
  for (const auto& a : s.algorithms)
    if (a->backwards_create_graph()) return true;
  return false;
}

// Composer: "total" when the model names one, else the sum of the losses' means.
at::Tensor total_of(const std::map<std::string, at::Tensor>& losses, const std::string& model) {
  if (losses.empty()) throw std::invalid_argument(model + ".losses() returned no loss");
  if (auto it = losses.find("total"); it != losses.end()) return it->second;
  at::Tensor sum;
  for (const auto& [name, l] : losses) sum = sum.defined() ? sum + l.mean() : l.mean();
  return sum;
}

// Train metrics from the microbatch as it was before BEFORE_FORWARD, reusing the training outputs.
void update_train_metrics(State& s, const Batch& original_microbatch) {
  if (s.train_metrics.empty()) return;
  at::NoGradGuard no_grad;
  ComposerModel& model = *s.model;
  const at::Tensor outputs = model.eval_forward(original_microbatch, s.outputs.detach());
  for (auto& [name, metric] : s.train_metrics) model.update_metric(original_microbatch, outputs, *metric);
}

void add_weighted(std::map<std::string, at::Tensor>& totals, const std::string& name, const at::Tensor& loss,
                  double weight) {
  const at::Tensor weighted = loss.detach().to(at::kFloat).mean() * weight;
  auto [it, fresh] = totals.try_emplace(name, weighted);
  if (!fresh) it->second = it->second + weighted;
}

// Every rank ran out of its attempt and at least one ran out of memory: redo the batch with a smaller size.
struct RetryBatch {};

}  // namespace

TrainStep::TrainStep(State& state, Engine& engine, Logger& logger)
    : state_(state),
      engine_(engine),
      logger_(logger),
      precision_(state.precision, state.device),
      search_("train", state.device) {}

// Forward, loss and backward of one microbatch; adds its weighted losses to `totals`.
void TrainStep::train_microbatch(double weight, std::map<std::string, at::Tensor>& totals, bool sync_gradients) {
  State& s = state_;
  const Batch original = s.batch;
  {
    auto scope = s.strategy->enter(dist::Phase::TRAIN_FORWARD);  // FSDP: the weights gathered until the loss
    engine_.run_event(Event::BEFORE_FORWARD);
    {
      auto autocast = precision_.enter();
      s.outputs = s.model->forward(detail::forward_inputs(s.batch, *s.strategy));
    }
    engine_.run_event(Event::AFTER_FORWARD);
    engine_.run_event(Event::BEFORE_LOSS);
    {
      auto autocast = precision_.enter();
      s.losses = s.model->losses(s.outputs, s.batch);
      s.loss = total_of(s.losses, s.model->name());
    }
    engine_.run_event(Event::AFTER_LOSS);
  }
  engine_.run_event(Event::BEFORE_BACKWARD);
  add_weighted(totals, "total", s.loss, weight);
  for (const auto& [name, l] : s.losses)
    if (name != "total") add_weighted(totals, name, l, weight);
  at::Tensor to_backprop = s.loss.dim() == 0 ? s.loss : s.loss.mean();  // Composer backpropagates the mean
  if (precision_.uses_grad_scaling()) to_backprop = s.scaler->scale(to_backprop);
  s.strategy->before_backward(sync_gradients);  // no gradient sync on all but the last microbatch
  {
    auto scope = s.strategy->enter(dist::Phase::TRAIN_BACKWARD);
    (to_backprop * weight).backward({}, /*retain_graph=*/c10::nullopt, /*create_graph=*/backwards_create_graph(s));
  }
  s.strategy->after_backward(sync_gradients);
  engine_.run_event(Event::AFTER_BACKWARD);
  update_train_metrics(s, original);
}

// BEFORE_TRAIN_BATCH .. AFTER_TRAIN_BATCH: the block an optimizer closure re-runs (SAM runs it twice). While
// searching, every collective inside is preceded by a check_in_attempt, so a rank that ran out of memory (waiting in
// any_out_of_memory) never meets a different collective; the gradients are averaged once every rank is through.
std::map<std::string, at::Tensor> TrainStep::train_microbatches() {
  State& s = state_;
  const bool searching = s.auto_microbatching;
  const bool sync = !optim::NoSyncClosure::active();  // SAM's ascent pass keeps each rank's gradient
  std::map<std::string, at::Tensor> totals;
  Batch batch;
  bool out_of_memory = false;
  try {
    engine_.run_event(Event::BEFORE_TRAIN_BATCH);
    s.optimizer->zero_grad(/*set_to_none=*/true);
    s.strategy->zero_grad();
    batch = s.batch;  // algorithms at BEFORE_TRAIN_BATCH may have changed it
    const int64_t size = s.device_train_microbatch_size;
    const std::vector<Batch> microbatches = size > 0 ? batch.split(size) : std::vector<Batch>{batch};
    if (searching) search_.check_in_attempt();
    const double mean_samples = s.strategy->mean_batch_samples(static_cast<double>(batch.num_samples()));
    for (size_t i = 0; i < microbatches.size(); ++i) {
      s.batch = microbatches[i];
      train_microbatch(static_cast<double>(microbatches[i].num_samples()) / mean_samples, totals,
                       sync && !searching && i + 1 == microbatches.size());
      if (searching) search_.check_in_attempt();
    }
  } catch (const std::exception& e) {
    if (!searching || !is_out_of_memory(e)) throw;
    out_of_memory = true;
  }
  if (searching) {
    if (search_.any_out_of_memory(out_of_memory)) throw RetryBatch();
    if (sync) s.strategy->sync_gradients();
  }
  s.batch = batch;
  if (precision_.uses_grad_scaling()) s.scaler->unscale_(*s.optimizer);
  engine_.run_event(Event::AFTER_TRAIN_BATCH);
  return totals;
}

std::map<std::string, at::Tensor> TrainStep::step_optimizer(int& closure_runs) {
  State& s = state_;
  const Batch full_batch = s.batch;
  std::map<std::string, at::Tensor> totals;
  if (precision_.uses_grad_scaling()) {
    ++closure_runs;
    totals = train_microbatches();
    s.scaler->step(*s.optimizer);
    s.scaler->update();
    return totals;
  }
  s.optimizer->step([&]() -> at::Tensor {
    s.batch = full_batch;  // a closure re-run (SAM) starts from the batch as it came
    auto run_totals = train_microbatches();
    if (++closure_runs == 1) totals = run_totals;  // as Composer, the step reports its first run's losses (SAM's)
    return run_totals.at("total");
  });
  return totals;
}

// What a failed attempt left behind, as Composer's _clear_incomplete_train_states.
void TrainStep::release_attempt() {
  State& s = state_;
  s.outputs = at::Tensor();
  s.loss = at::Tensor();
  s.losses.clear();
  s.optimizer->zero_grad(/*set_to_none=*/true);
  s.strategy->zero_grad();
  if (s.scaler) s.scaler->reset_step();
  release_cached_memory(s.device);
}

std::map<std::string, at::Tensor> TrainStep::run_searching() {
  State& s = state_;
  const Batch full_batch = s.batch;
  if (s.device_train_microbatch_size <= 0) s.device_train_microbatch_size = full_batch.num_samples();
  const GeneratorStates generators = GeneratorStates::capture();
  const MetricStates metric_states(s.train_metrics);
  for (;;) {
    int closure_runs = 0;
    try {
      return step_optimizer(closure_runs);
    } catch (const RetryBatch&) {
      if (closure_runs > 1) {
        throw std::runtime_error("automatic microbatching: out of memory in the optimizer's closure run " +
                                 std::to_string(closure_runs) +
                                 ", after an earlier run had moved the weights, so the batch cannot be redone; set "
                                 "device_train_microbatch_size to a number of samples");
      }
    } catch (const std::exception& e) {
      if (!is_out_of_memory(e)) throw;
      throw std::runtime_error(
          "automatic microbatching: out of memory after the microbatches (gradient averaging, AFTER_TRAIN_BATCH or "
          "the optimizer step), which a smaller microbatch does not shrink: " +
          brief_error(e));
    }
    release_attempt();
    generators.restore();
    metric_states.restore();
    const int64_t before = s.device_train_microbatch_size;
    s.device_train_microbatch_size = MicrobatchSearch::halve(before, "train");
    if (dist::get_global_rank() == 0) {
      std::cerr << "composer: warning: out of memory at device_train_microbatch_size " << before << "; redoing batch "
                << s.timestamp.batch << " with " << s.device_train_microbatch_size << "\n";
    }
    s.batch = full_batch;
  }
}

std::map<std::string, at::Tensor> TrainStep::run() {
  State& s = state_;
  if (!s.model || !s.optimizer)
    throw std::invalid_argument("TrainStep.run: state.model and state.optimizer must be set");
  if (precision_.uses_grad_scaling() && !s.scaler)
    throw std::invalid_argument("TrainStep.run: amp_fp16 needs state.scaler");
  s.strategy->begin_step();
  const int64_t batch_samples = s.batch.num_samples();
  std::map<std::string, at::Tensor> totals;
  if (s.auto_microbatching) {
    totals = run_searching();
  } else {
    int closure_runs = 0;
    totals = step_optimizer(closure_runs);
  }
  const int64_t size = s.device_train_microbatch_size;
  logger_.log_metrics({{"trainer/device_train_microbatch_size",
                        static_cast<double>(MicrobatchSearch::used_size(size, batch_samples))}});
  return totals;
}

}  // namespace composer
