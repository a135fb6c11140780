#include "trainer/detail/eager_step.h"

#include "composer/core/algorithm.h"
#include "composer/core/engine.h"
#include "composer/core/state.h"
#include "composer/dist/collective_check.h"
#include "composer/dist/strategy.h"
#include "composer/metrics/metric.h"
#include "composer/models/composer_model.h"
#include "composer/optim/closure.h"
#include "composer/optim/grad_scaler.h"
#include "composer/trainer/microbatch_search.h"
#include "trainer/detail/data_hooks.h"
#include "trainer/detail/forward_inputs.h"

#include <torch/torch.h>

#include <optional>
#include <stdexcept>

namespace composer::detail {
namespace {

// Composer: "total" when the model names one, else the sum of the losses' means.
at::Tensor total_of(const LossTotals& losses, const std::string& model) {
  if (losses.empty()) throw std::invalid_argument(model + ".losses() returned no loss");
  if (auto it = losses.find("total"); it != losses.end()) return it->second;
  at::Tensor sum;
  for (const auto& [name, l] : losses) sum = sum.defined() ? sum + l.mean() : l.mean();
  return sum;
}

// Adds the loss's float mean times `weight` to totals[name]. The mean of a 0-d loss and a product by a weight of 1 are
// exact, so they are skipped (the whole batch in one microbatch): a copy instead of eight small ops a step.
void add_weighted(LossTotals& totals, const std::string& name, const at::Tensor& loss, double weight) {
  at::Tensor weighted = loss.scalar_type() == at::kFloat ? loss.detach() : loss.detach().to(at::kFloat);
  if (weighted.dim() != 0) weighted = weighted.mean();
  weighted = weight == 1.0 ? weighted.clone() : weighted * weight;  // never an alias of the loss
  auto [it, fresh] = totals.try_emplace(name, weighted);
  if (!fresh) it->second = it->second + weighted;
}

// The microbatches of this step, as the train loader splits them (Composer's split_batch): a fractional size, a
// number of samples, or the whole batch.
std::vector<Batch> split_for_step(const State& s, const DataLoader& loader, const Batch& batch) {
  if (s.device_train_microbatch_fraction > 0) return loader.split_batch(batch, s.device_train_microbatch_fraction);
  if (s.device_train_microbatch_size > 0)
    return loader.split_batch(batch, static_cast<double>(s.device_train_microbatch_size));
  return {batch};
}

}  // namespace

bool backwards_create_graph(const State& s) {
  for (const auto& a : s.algorithms)
    if (a->backwards_create_graph()) return true;
  return false;
}

void update_train_metrics(State& s, const Batch& original_microbatch) {
  if (s.train_metrics.empty()) return;
  at::NoGradGuard no_grad;
  ComposerModel& model = *s.model;
  const at::Tensor outputs = model.eval_forward(original_microbatch, s.outputs.detach());
  for (auto& [name, metric] : s.train_metrics) model.update_metric(original_microbatch, outputs, *metric);
}

void forward_backward(State& s, PrecisionContext& precision, const std::function<void(Event)>& fire, double weight,
                      LossTotals& totals, bool sync_gradients) {
  {
    auto scope = s.strategy->enter(dist::Phase::TRAIN_FORWARD);  // FSDP: the weights gathered until the loss
    fire(Event::BEFORE_FORWARD);
    {
      auto autocast = precision.enter();
      s.outputs = s.model->forward(forward_inputs(s.batch, *s.strategy));
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
    if (weight != 1.0) to_backprop = to_backprop * weight;  // x * 1 is x: no product and no MulBackward node
    to_backprop.backward({}, /*retain_graph=*/c10::nullopt, /*create_graph=*/backwards_create_graph(s));
  }
  s.strategy->after_backward(sync_gradients);
  fire(Event::AFTER_BACKWARD);
}

EagerStep::EagerStep(State& state, Engine& engine, PrecisionContext precision, TrainStepOptions options)
    : state_(state), engine_(engine), precision_(precision), options_(options) {}

// Forward, loss and backward of one microbatch; adds its weighted losses to `totals`.
void EagerStep::train_microbatch(double weight, LossTotals& totals, bool sync_gradients) {
  State& s = state_;
  const Batch original = s.batch;
  forward_backward(
      s, precision_, [this](Event e) { engine_.run_event(e); }, weight, totals, sync_gradients);
  update_train_metrics(s, original);
}

// BEFORE_TRAIN_BATCH .. AFTER_TRAIN_BATCH: the block an optimizer closure re-runs (SAM runs it twice). While
// searching, every collective inside (the strategy's too: dist::CollectiveCheck) is preceded by a check_in_attempt,
// so a rank that ran out of memory (waiting in any_out_of_memory) never meets a different collective; the gradients
// are averaged once every rank is through.
LossTotals EagerStep::train_microbatches(const MicrobatchSearch* search) {
  State& s = state_;
  const bool sync = !optim::NoSyncClosure::active();  // SAM's ascent pass keeps each rank's gradient
  LossTotals totals;
  Batch batch;
  bool out_of_memory = false;
  try {
    // The strategy's collectives inside the passes (FSDP's all-gathers) are preceded by the same check.
    std::optional<dist::CollectiveCheck> check_collectives;
    if (search) check_collectives.emplace([search] { search->check_in_attempt(); });
    engine_.run_event(Event::BEFORE_TRAIN_BATCH);
    s.optimizer->zero_grad(/*set_to_none=*/true);
    s.strategy->zero_grad();
    batch = s.batch;  // algorithms at BEFORE_TRAIN_BATCH may have changed it
    const DataLoader& loader = data_hooks(s.train_dataloader.get());
    const std::vector<Batch> microbatches = split_for_step(s, loader, batch);
    if (search) search->check_in_attempt();
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
      train_microbatch(size_of(microbatches[i]) / mean_size, totals, sync && !search && i + 1 == microbatches.size());
      if (search) search->check_in_attempt();
    }
  } catch (const std::exception& e) {
    if (!search || !is_out_of_memory(e)) throw;
    out_of_memory = true;
  }
  if (search) {
    if (search->any_out_of_memory(out_of_memory)) throw RetryBatch();
    if (sync) s.strategy->sync_gradients();
  }
  s.batch = batch;
  if (precision_.uses_grad_scaling()) s.scaler->unscale_(*s.optimizer);
  engine_.run_event(Event::AFTER_TRAIN_BATCH);
  return totals;
}

LossTotals EagerStep::run(const MicrobatchSearch* search, int& closure_runs) {
  State& s = state_;
  const Batch full_batch = s.batch;
  LossTotals totals;
  if (precision_.uses_grad_scaling()) {
    ++closure_runs;
    totals = train_microbatches(search);
    s.scaler->step(*s.optimizer);
    s.scaler->update();
    return totals;
  }
  s.optimizer->step([&]() -> at::Tensor {
    s.batch = full_batch;  // a closure re-run (SAM) starts from the batch as it came
    auto run_totals = train_microbatches(search);
    if (++closure_runs == 1) totals = run_totals;  // as Composer, the step reports its first run's losses (SAM's)
    return run_totals.at("total");
  });
  return totals;
}

}  // namespace composer::detail
