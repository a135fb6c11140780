#include "trainer/detail/eval_loop.h"

#include "trainer/detail/global_metric.h"

#include "composer/dist/dist.h"
#include "composer/metrics/metric.h"
#include "composer/models/composer_model.h"

#include <torch/torch.h>

#include <chrono>

namespace composer::detail {
namespace {

// Restores the train loader and the model's training mode when an eval or predict loop ends (or throws).
class LoaderSwap {
 public:
  explicit LoaderSwap(State& s)
      : s_(s), loader_(s.dataloader), label_(s.dataloader_label), len_(s.dataloader_len), training_(s.model->is_training()) {}
  ~LoaderSwap() {
    s_.dataloader = loader_;
    s_.dataloader_label = label_;
    s_.dataloader_len = len_;
    s_.model->train(training_);
  }

 private:
  State& s_;
  DataLoader* loader_;
  std::string label_;
  std::optional<int64_t> len_;
  bool training_;
};

}  // namespace

void run_eval_loop(TrainerImpl& t, Evaluator& evaluator) {
  State& s = t.state;
  LoaderSwap swap(s);
  const int64_t subset =
      evaluator.subset_num_batches >= 0 ? evaluator.subset_num_batches : t.options.eval_subset_num_batches();
  s.set_dataloader(evaluator.dataloader.get(), evaluator.label, subset);
  s.eval_timestamp = Timestamp();
  at::NoGradGuard no_grad;
  s.model->eval();
  t.engine.run_event(Event::EVAL_START);
  MetricMap& metrics = s.eval_metrics[evaluator.label];
  for (auto& [name, m] : metrics) m->reset();
  DataLoader& loader = *evaluator.dataloader;
  loader.set_epoch(s.timestamp.batch);
  loader.reset();
  const int64_t mb_size = evaluator.device_eval_microbatch_size.value_or(0);
  auto batch_start = std::chrono::steady_clock::now();
  for (int64_t i = 0; !s.dataloader_len || i < *s.dataloader_len; ++i) {
    auto batch = loader.next();
    if (!batch) break;
    s.batch = batch->to(s.device);
    t.engine.run_event(Event::EVAL_BATCH_START);
    const Batch full = s.batch;
    for (const Batch& mb : mb_size > 0 ? full.split(mb_size) : std::vector<Batch>{full}) {
      s.batch = mb;
      t.engine.run_event(Event::EVAL_BEFORE_FORWARD);
      {
        auto autocast = t.precision->enter();
        s.outputs = s.model->eval_forward(s.batch);
      }
      t.engine.run_event(Event::EVAL_AFTER_FORWARD);
      for (auto& [name, m] : metrics) s.model->update_metric(s.batch, s.outputs, *m);
    }
    s.batch = full;
    const auto now = std::chrono::steady_clock::now();
    s.eval_timestamp = s.eval_timestamp.to_next_batch(full.num_samples(), full.num_tokens(),
                                                      std::chrono::duration_cast<Seconds>(now - batch_start));
    batch_start = now;
    t.engine.run_event(Event::EVAL_BATCH_END);
  }
  std::map<std::string, double> values;
  for (auto& [name, m] : metrics) {
    const double v = compute_global(*m);
    values["metrics/" + evaluator.label + "/" + name] = v;
    s.eval_metric_values[name] = v;
  }
  t.logger.log_metrics(values);
  t.engine.run_event(Event::EVAL_END);
}

void run_due_evaluators(TrainerImpl& t, Event event) {
  std::vector<size_t> due;
  for (size_t i = 0; i < t.state.evaluators.size(); ++i)
    if (t.eval_due[i](t.state, event)) due.push_back(i);
  if (due.empty()) return;
  t.engine.run_event(Event::EVAL_BEFORE_ALL);
  for (size_t i : due) run_eval_loop(t, t.state.evaluators[i]);
  t.engine.run_event(Event::EVAL_AFTER_ALL);
}

std::vector<at::Tensor> run_predict_loop(TrainerImpl& t, DataLoader& loader, int64_t subset_num_batches) {
  State& s = t.state;
  LoaderSwap swap(s);
  s.set_dataloader(&loader, "predict", subset_num_batches);
  s.predict_timestamp = Timestamp();
  at::NoGradGuard no_grad;
  s.model->eval();
  t.engine.run_event(Event::PREDICT_START);
  loader.set_epoch(0);
  loader.reset();
  std::vector<at::Tensor> outputs;
  for (int64_t i = 0; !s.dataloader_len || i < *s.dataloader_len; ++i) {
    auto batch = loader.next();
    if (!batch) break;
    s.batch = batch->to(s.device);
    t.engine.run_event(Event::PREDICT_BATCH_START);
    t.engine.run_event(Event::PREDICT_BEFORE_FORWARD);
    {
      auto autocast = t.precision->enter();
      s.outputs = s.model->forward(s.batch);
    }
    t.engine.run_event(Event::PREDICT_AFTER_FORWARD);
    outputs.push_back(s.outputs.to(at::kCPU));
    s.predict_timestamp = s.predict_timestamp.to_next_batch(s.batch.num_samples(), s.batch.num_tokens());
    t.engine.run_event(Event::PREDICT_BATCH_END);
  }
  t.engine.run_event(Event::PREDICT_END);
  return outputs;
}

}  // namespace composer::detail
