#include "trainer/detail/graphed_step.h"

#include "composer/core/algorithm.h"
#include "composer/core/engine.h"
#include "composer/core/state.h"
#include "composer/dist/env.h"
#include "composer/dist/strategy.h"
#include "composer/optim/optimizer.h"
#include "composer/utils/type_name.h"
#include "trainer/detail/data_hooks.h"

#include <torch/torch.h>

#include <stdexcept>

namespace composer::detail {
namespace {

// Which of the optimizer's parameters train now: a recorded step updates those it was recorded with.
std::vector<bool> trainable_flags(const torch::optim::Optimizer& optimizer) {
  std::vector<bool> flags;
  for (const auto& group : optimizer.param_groups())
    for (const auto& p : group.params()) flags.push_back(p.requires_grad());
  return flags;
}

}  // namespace

GraphedStep::GraphedStep(State& state, Engine& engine, PrecisionContext& precision, EagerStep& step,
                         const TrainStepOptions& options)
    : state_(state),
      engine_(engine),
      precision_(precision),
      step_(step),
      warmup_steps_(options.cuda_graph_warmup_steps()) {
  const std::vector<std::string> found = obstacles(state);
  if (!found.empty()) {
    std::string text = "cuda_graph: true cannot record this run's train step: ";
    for (size_t i = 0; i < found.size(); ++i) text += (i ? "; " : "") + found[i];
    throw std::invalid_argument(text);
  }
  dynamic_cast<optim::Optimizer&>(*state.optimizer).set_graph_capture(true);
  graph_ = std::make_unique<CapturedStep>();  // after the checks: it initializes CUDA
}

std::vector<std::string> GraphedStep::obstacles(const State& s) {
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

// Records forward, loss, backward and the optimizer step into the graph (inside BEFORE_TRAIN_BATCH ..
// AFTER_TRAIN_BATCH, without the events between them), on the graph's static copy of this batch.
LossTotals GraphedStep::record() {
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
  CapturedStep& graph = *graph_;
  graph.record(batch, [&](const Batch& inputs) {
    s.batch = inputs;
    LossTotals totals;
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

// Warm-up steps eagerly on a side stream, then the recorded step replayed for each batch that fits it.
LossTotals GraphedStep::run() {
  State& s = state_;
  auto& optimizer = dynamic_cast<optim::Optimizer&>(*s.optimizer);
  optimizer.refresh_graph_scalars();  // the scheduler's lr for this step, into the tensors the step reads
  LossTotals totals;
  int closure_runs = 0;
  if (eager_steps_ < warmup_steps_) {
    ++eager_steps_;
    CapturedStep::on_side_stream(s.device, [&] { totals = step_.run(nullptr, closure_runs); });
    return totals;
  }
  if (graph_->recorded() && graph_->trainable != trainable_flags(*s.optimizer)) {
    graph_ = std::make_unique<CapturedStep>();  // LayerFreezing and the like: record the new step
  }
  CapturedStep& graph = *graph_;
  if (graph.recorded() && !graph.fits(s.batch)) return step_.run(nullptr, closure_runs);  // a last, smaller batch
  engine_.run_event(Event::BEFORE_TRAIN_BATCH);
  s.batch = data_hooks(s.train_dataloader.get()).transform_microbatch(s.batch);  // it must keep the shapes
  if (!graph.recorded()) record();
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

}  // namespace composer::detail
