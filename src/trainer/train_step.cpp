#include "composer/trainer/train_step.h"

#include "composer/core/algorithm.h"
#include "composer/core/engine.h"
#include "composer/core/logger.h"
#include "composer/core/state.h"
#include "composer/dist/env.h"
#include "composer/dist/strategy.h"
#include "composer/metrics/metric.h"
#include "composer/models/composer_model.h"
#include "composer/optim/closure.h"
#include "composer/optim/grad_scaler.h"
#include "composer/optim/optimizer.h"
#include "composer/utils/error_text.h"
#include "composer/utils/reproducibility.h"
#include "composer/utils/type_name.h"
#include "trainer/detail/captured_step.h"
#include "trainer/detail/data_hooks.h"
#include "trainer/detail/forward_inputs.h"

#include <torch/torch.h>

#include <functional>
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

// Which of the optimizer's parameters train now: a recorded step updates those it was recorded with.
std::vector<bool> trainable_flags(const torch::optim::Optimizer& optimizer) {
  std::vector<bool> flags;
  for (const auto& group : optimizer.param_groups())
    for (const auto& p : group.params()) flags.push_back(p.requires_grad());
  return flags;
}

// Automatic microbatching shrinks in the batch it starts with, and may again when a later batch needs more (longer
// inputs, a new high-water mark); a third batch that shrinks means memory in use keeps growing, and halving on would
// only postpone running out. `shrinks` holds one "batch B: S -> T" entry per batch that shrank.
constexpr size_t kMaxShrinkingBatches = 2;

void note_shrink(std::vector<std::string>& shrinks, int64_t batch, int64_t from, int64_t to) {
  const std::string label = "batch " + std::to_string(batch) + ": ";
  if (!shrinks.empty() && shrinks.back().rfind(label, 0) == 0) {
    shrinks.back() = shrinks.back().substr(0, shrinks.back().rfind(' ') + 1) + std::to_string(to);
    return;
  }
  shrinks.push_back(label + std::to_string(from) + " -> " + std::to_string(to));
  if (shrinks.size() <= kMaxShrinkingBatches) return;
  std::string list;
  for (const auto& entry : shrinks) list += (list.empty() ? "" : ", ") + entry;
  throw std::runtime_error("automatic microbatching: device_train_microbatch_size shrank in " +
                           std::to_string(shrinks.size()) + " different batches (" + list +
                           "): memory in use grows from batch to batch (tensors kept across steps, a growing cache), "
                           "and halving again would only postpone running out; find what holds the memory, or set "
                           "device_train_microbatch_size to a number");
}

// The body of a microbatch: forward, losses, weighted backward, and its losses added to `totals`, firing the events
// between through `fire`. An eager microbatch fires them on the Engine; recording a CUDA graph passes a no-op (those
// events fire in eager steps only).
void forward_backward(State& s, PrecisionContext& precision, const std::function<void(Event)>& fire, double weight,
                      std::map<std::string, at::Tensor>& totals, bool sync_gradients) {
  {
    auto scope = s.strategy->enter(dist::Phase::TRAIN_FORWARD);  // FSDP: the weights gathered until the loss
    fire(Event::BEFORE_FORWARD);
    {
      auto autocast = precision.enter();
      s.outputs = s.model->forward(detail::forward_inputs(s.batch, *s.strategy));
    }
    fire(Event::AFTER_FORWARD);
    fire(Event::BEFORE_LOSS);
    {
      auto autocast = precision.enter();
      s.losses = s.model->losses(s.outputs, s.batch);
      s.loss = total_of(s.losses, s.model->name());
    }
    fire(Event::AFTER_LOSS);
  }
  fire(Event::BEFORE_BACKWARD);
  add_weighted(totals, "total", s.loss, weight);
  for (const auto& [name, l] : s.losses)
    if (name != "total") add_weighted(totals, name, l, weight);
  at::Tensor to_backprop = s.loss.dim() == 0 ? s.loss : s.loss.mean();  // Composer backpropagates the mean
  if (precision.uses_grad_scaling()) to_backprop = s.scaler->scale(to_backprop);
  s.strategy->before_backward(sync_gradients);  // no gradient sync on all but the last microbatch
  {
    auto scope = s.strategy->enter(dist::Phase::TRAIN_BACKWARD);
    (to_backprop * weight).backward({}, /*retain_graph=*/c10::nullopt, /*create_graph=*/backwards_create_graph(s));
  }
  s.strategy->after_backward(sync_gradients);
  fire(Event::AFTER_BACKWARD);
}

// Every rank ran out of its attempt and at least one ran out of memory: redo the batch with a smaller size.
struct RetryBatch {};

}  // namespace

TrainStep::TrainStep(State& state, Engine& engine, Logger& logger, TrainStepOptions options)
    : state_(state),
      engine_(engine),
      logger_(logger),
      precision_(state.precision, state.device),
      search_("train", state.device),
      options_(options) {
  if (options_.cuda_graph_warmup_steps() < 1) {
    throw std::invalid_argument(
        "cuda_graph_warmup_steps must be >= 1 (an eager step creates the optimizer's state), "
        "got " +
        std::to_string(options_.cuda_graph_warmup_steps()));
  }
  if (!options_.cuda_graph()) return;
  const std::vector<std::string> obstacles = cuda_graph_obstacles(state);
  if (!obstacles.empty()) {
    std::string text = "cuda_graph: true cannot record this run's train step: ";
    for (size_t i = 0; i < obstacles.size(); ++i) text += (i ? "; " : "") + obstacles[i];
    throw std::invalid_argument(text);
  }
  dynamic_cast<optim::Optimizer&>(*state.optimizer).set_graph_capture(true);
  graph_ = std::make_unique<detail::CapturedStep>();
}

TrainStep::~TrainStep() = default;

std::vector<std::string> TrainStep::cuda_graph_obstacles(const State& s) {
  std::vector<std::string> found;
  if (!s.device.is_cuda()) found.push_back("the device is " + s.device.str() + ", and CUDA graphs need a CUDA device");
  const int64_t world = s.strategy ? s.strategy->num_replicas() : dist::get_world_size();
  if (world > 1) {
    found.push_back("the world size is " + std::to_string(world) +
                    ", and the gradient collectives are not recorded (one process only)");
  }
  if (const auto obstacle = s.strategy ? s.strategy->cuda_graph_obstacle() : std::nullopt) found.push_back(*obstacle);
  if (s.precision == Precision::AMP_FP16) {
    found.push_back("precision amp_fp16's grad scaler decides on the host whether to step; use amp_bf16 or fp32");
  }
  if (s.auto_microbatching) {
    found.push_back("device_train_microbatch_size auto changes the step's shapes; give a number or leave it unset");
  }
  if (!s.optimizer) {
    found.push_back("no optimizer is set");
  } else if (!optim::supports_graph_capture(*s.optimizer)) {
    found.push_back("the optimizer " + class_name_of(*s.optimizer) +
                    " cannot be recorded (DecoupledSGDW and DecoupledAdamW can)");
  }
  static constexpr Event kInside[] = {Event::BEFORE_TRAIN_BATCH, Event::BEFORE_FORWARD,   Event::AFTER_FORWARD,
                                      Event::BEFORE_LOSS,        Event::AFTER_LOSS,       Event::BEFORE_BACKWARD,
                                      Event::AFTER_BACKWARD,     Event::AFTER_TRAIN_BATCH};
  for (const auto& a : s.algorithms) {
    for (Event e : kInside) {
      if (!a->match(e, s)) continue;
      found.push_back("the algorithm " + a->name() + " acts on " + event_name(e) +
                      ", inside the step, where its host code would run once, at the recording");
      break;
    }
  }
  if (backwards_create_graph(s)) found.push_back("an algorithm backpropagates with create_graph");
  return found;
}

// Forward, loss and backward of one microbatch; adds its weighted losses to `totals`.
void TrainStep::train_microbatch(double weight, std::map<std::string, at::Tensor>& totals, bool sync_gradients) {
  State& s = state_;
  const Batch original = s.batch;
  forward_backward(
      s, precision_, [this](Event e) { engine_.run_event(e); }, weight, totals, sync_gradients);
  update_train_metrics(s, original);
}

namespace {

// The microbatches of this step, as the train loader splits them (Composer's split_batch): a fractional size, a
// number of samples, or the whole batch.
std::vector<Batch> split_for_step(const State& s, const DataLoader& loader, const Batch& batch) {
  if (s.device_train_microbatch_fraction > 0) return loader.split_batch(batch, s.device_train_microbatch_fraction);
  if (s.device_train_microbatch_size > 0)
    return loader.split_batch(batch, static_cast<double>(s.device_train_microbatch_size));
  return {batch};
}

}  // namespace

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
    const DataLoader& loader = detail::data_hooks(s.train_dataloader.get());
    const std::vector<Batch> microbatches = split_for_step(s, loader, batch);
    if (searching) search_.check_in_attempt();
    const bool on_tokens = options_.accumulate_train_batch_on_tokens();
    const auto size_of = [&](const Batch& b) {
      return on_tokens ? static_cast<double>(loader.num_tokens_in_batch(b, TokenType::kLossGenerating))
                       : loader.num_samples_in_batch(b);
    };
    const double mean_size = s.strategy->mean_batch_samples(size_of(batch));  // the same on every rank
    if (on_tokens && mean_size <= 0)
      throw std::invalid_argument(
          "accumulate_train_batch_on_tokens: the batch has no loss-generating token on any "
          "rank (every label is -100, or no labels and no input_ids)");
    for (size_t i = 0; i < microbatches.size(); ++i) {
      s.batch = loader.transform_microbatch(microbatches[i]);
      train_microbatch(size_of(microbatches[i]) / mean_size, totals,
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
    note_shrink(shrinks_, s.timestamp.batch, before, s.device_train_microbatch_size);
    if (dist::get_global_rank() == 0) {
      std::cerr << "composer: warning: out of memory at device_train_microbatch_size " << before << "; redoing batch "
                << s.timestamp.batch << " with " << s.device_train_microbatch_size << "\n";
    }
    s.batch = full_batch;
  }
}

std::map<std::string, at::Tensor> TrainStep::run_eager() {
  if (state_.auto_microbatching) return run_searching();
  int closure_runs = 0;
  return step_optimizer(closure_runs);
}

// Records forward, loss, backward and the optimizer step into the graph (inside BEFORE_TRAIN_BATCH ..
// AFTER_TRAIN_BATCH, without the events between them), on the graph's static copy of this batch.
std::map<std::string, at::Tensor> TrainStep::record_step() {
  State& s = state_;
  const int64_t samples = s.batch.num_samples();
  if (s.device_train_microbatch_fraction > 0 ||
      (s.device_train_microbatch_size > 0 && s.device_train_microbatch_size < samples)) {
    throw std::invalid_argument("cuda_graph: device_train_microbatch_size " +
                                std::to_string(s.device_train_microbatch_size) +
                                " (or a fraction) splits the batch of " + std::to_string(samples) +
                                " samples, and a recorded step takes one microbatch; leave it unset");
  }
  const Batch batch = s.batch;
  s.optimizer->zero_grad(/*set_to_none=*/true);  // the recorded backward writes fresh gradient buffers
  detail::CapturedStep& graph = *graph_;
  graph.record(batch, [&](const Batch& inputs) {
    s.batch = inputs;
    std::map<std::string, at::Tensor> totals;
    forward_backward(
        s, precision_, [](Event) {}, 1.0, totals, /*sync_gradients=*/true);
    s.optimizer->step();
    graph.totals = totals;
  });
  graph.trainable = trainable_flags(*s.optimizer);
  graph.outputs = s.outputs;
  graph.loss = s.loss;
  graph.losses = s.losses;
  for (const auto& group : s.optimizer->param_groups())
    for (const auto& p : group.params())
      if (p.grad().defined()) graph.grads.emplace_back(p, p.grad());
  s.batch = batch;
  return graph.totals;
}

// cuda_graph: warm-up steps eagerly on a side stream, then the recorded step replayed for each batch that fits it.
std::map<std::string, at::Tensor> TrainStep::run_graphed() {
  State& s = state_;
  auto& optimizer = dynamic_cast<optim::Optimizer&>(*s.optimizer);
  optimizer.refresh_graph_scalars();  // the scheduler's lr for this step, into the tensors the step reads
  std::map<std::string, at::Tensor> totals;
  if (eager_steps_ < options_.cuda_graph_warmup_steps()) {
    ++eager_steps_;
    detail::CapturedStep::on_side_stream(s.device, [&] { totals = run_eager(); });
    return totals;
  }
  if (graph_->recorded() && graph_->trainable != trainable_flags(*s.optimizer)) {
    graph_ = std::make_unique<detail::CapturedStep>();  // LayerFreezing and the like: record the new step
  }
  detail::CapturedStep& graph = *graph_;
  if (graph.recorded() && !graph.fits(s.batch)) return run_eager();  // another shape: the last, smaller batch
  engine_.run_event(Event::BEFORE_TRAIN_BATCH);
  s.batch = detail::data_hooks(s.train_dataloader.get()).transform_microbatch(s.batch);  // it must keep the shapes
  if (!graph.recorded()) record_step();
  graph.replay(s.batch);
  s.outputs = graph.outputs;
  s.loss = graph.loss;
  s.losses = graph.losses;
  for (auto& [param, grad] : graph.grads)  // an eager step in between gave the parameters other gradient tensors
    if (!param.grad().is_same(grad)) param.mutable_grad() = grad;
  update_train_metrics(s, s.batch);
  engine_.run_event(Event::AFTER_TRAIN_BATCH);
  for (const auto& [name, t] : graph.totals) totals[name] = t.clone();  // the next replay overwrites them
  return totals;
}

std::map<std::string, at::Tensor> TrainStep::run() {
  State& s = state_;
  if (!s.model || !s.optimizer)
    throw std::invalid_argument("TrainStep.run: state.model and state.optimizer must be set");
  if (precision_.uses_grad_scaling() && !s.scaler)
    throw std::invalid_argument("TrainStep.run: amp_fp16 needs state.scaler");
  s.strategy->begin_step();
  const int64_t batch_samples = s.batch.num_samples();
  const std::map<std::string, at::Tensor> totals = graph_ ? run_graphed() : run_eager();
  const int64_t size = s.device_train_microbatch_size;
  logger_.log_metrics({{"trainer/device_train_microbatch_size",
                        s.device_train_microbatch_fraction > 0
                            ? s.device_train_microbatch_fraction
                            : static_cast<double>(MicrobatchSearch::used_size(size, batch_samples))}});
  return totals;
}

}  // namespace composer
