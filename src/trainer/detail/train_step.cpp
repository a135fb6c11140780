#include "trainer/detail/train_step.h"

#include "composer/metrics/metric.h"
#include "composer/models/composer_model.h"
#include "composer/dist/dist.h"
#include "composer/optim/grad_scaler.h"

#include <torch/torch.h>

namespace composer::detail {
namespace {

void zero_grad_set_to_none(torch::optim::Optimizer& optimizer) {
  for (auto& group : optimizer.param_groups())
    for (auto& p : group.params())
      if (p.grad().defined()) p.mutable_grad().reset();
}

// Train metrics from the microbatch as it was before BEFORE_FORWARD, reusing the training outputs.
void update_train_metrics(TrainerImpl& t, const Batch& original_microbatch) {
  if (t.state.train_metrics.empty()) return;
  at::NoGradGuard no_grad;
  ComposerModel& model = *t.state.model;
  const at::Tensor outputs = model.eval_forward(original_microbatch, t.state.outputs.detach());
  for (auto& [name, metric] : t.state.train_metrics) model.update_metric(original_microbatch, outputs, *metric);
}

// Forward, loss and backward of one microbatch; adds its weighted loss to `total`.
void train_microbatch(TrainerImpl& t, double weight, at::Tensor& total, bool sync_gradients) {
  State& s = t.state;
  const Batch original = s.batch;
  t.engine.run_event(Event::BEFORE_FORWARD);
  {
    auto autocast = t.precision->enter();
    s.outputs = s.model->forward(s.batch);
  }
  t.engine.run_event(Event::AFTER_FORWARD);
  t.engine.run_event(Event::BEFORE_LOSS);
  {
    auto autocast = t.precision->enter();
    s.loss = s.model->loss(s.outputs, s.batch);
  }
  t.engine.run_event(Event::AFTER_LOSS);
  t.engine.run_event(Event::BEFORE_BACKWARD);
  const at::Tensor weighted = s.loss.detach().to(at::kFloat).mean() * weight;
  total = total.defined() ? total + weighted : weighted;
  at::Tensor to_backprop = s.loss;
  if (t.precision->uses_grad_scaling()) to_backprop = s.scaler->scale(to_backprop);
  if (t.reducer) t.reducer->prepare(sync_gradients);  // no gradient sync on all but the last microbatch
  (to_backprop * weight).backward({}, /*retain_graph=*/c10::nullopt, /*create_graph=*/t.backwards_create_graph);
  if (t.reducer && sync_gradients) t.reducer->finalize();
  t.engine.run_event(Event::AFTER_BACKWARD);
  update_train_metrics(t, original);
}

// BEFORE_TRAIN_BATCH .. AFTER_TRAIN_BATCH: the block an optimizer closure re-runs (SAM runs it twice).
at::Tensor train_microbatches(TrainerImpl& t, const Batch& full_batch, int64_t microbatch_size) {
  State& s = t.state;
  s.batch = full_batch;
  t.engine.run_event(Event::BEFORE_TRAIN_BATCH);
  zero_grad_set_to_none(*s.optimizer);
  const Batch batch = s.batch;  // algorithms at BEFORE_TRAIN_BATCH may have changed it
  const std::vector<Batch> microbatches =
      microbatch_size > 0 ? batch.split(microbatch_size) : std::vector<Batch>{batch};
  // Composer: each microbatch's loss is weighted by its samples over the rank-average batch size, so the
  // gradients averaged across ranks are the sample-weighted mean over the global batch.
  double total_samples = static_cast<double>(batch.num_samples());
  if (dist::get_world_size() > 1) {
    at::Tensor samples = at::full({1}, total_samples, at::kDouble);
    dist::all_reduce(samples);
    total_samples = samples.item<double>() / static_cast<double>(dist::get_world_size());
  }
  at::Tensor total;
  for (size_t i = 0; i < microbatches.size(); ++i) {
    s.batch = microbatches[i];
    train_microbatch(t, static_cast<double>(microbatches[i].num_samples()) / total_samples, total, i + 1 == microbatches.size());
  }
  s.batch = batch;
  if (t.precision->uses_grad_scaling()) s.scaler->unscale_(*s.optimizer);
  t.engine.run_event(Event::AFTER_TRAIN_BATCH);
  return total;
}

}  // namespace

at::Tensor run_train_step(TrainerImpl& t, int64_t microbatch_size) {
  State& s = t.state;
  if (t.reducer) {  // DDP's broadcast_buffers: BatchNorm statistics follow rank 0
    at::NoGradGuard no_grad;
    for (auto& b : s.model->buffers()) dist::broadcast(b);
  }
  const Batch full_batch = s.batch;
  at::Tensor total;
  if (t.precision->uses_grad_scaling()) {
    total = train_microbatches(t, full_batch, microbatch_size);
    s.scaler->step(*s.optimizer);
    s.scaler->update();
  } else {
    s.optimizer->step([&]() -> at::Tensor {
      total = train_microbatches(t, full_batch, microbatch_size);
      return total;
    });
  }
  return total;
}

}  // namespace composer::detail
