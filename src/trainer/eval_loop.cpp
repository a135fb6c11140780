#include "composer/trainer/eval_loop.h"

#include "composer/core/engine.h"
#include "composer/core/evaluator.h"
#include "composer/core/logger.h"
#include "composer/core/state.h"
#include "composer/dist/collective_check.h"
#include "composer/dist/env.h"
#include "composer/metrics/metric.h"
#include "composer/models/composer_model.h"
#include "composer/trainer/microbatch_search.h"
#include "trainer/detail/batch_agreement.h"
#include "trainer/detail/cpu_eval_chunks.h"
#include "trainer/detail/forward_inputs.h"
#include "trainer/detail/global_metric.h"
#include "trainer/detail/loader_swap.h"

#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <iostream>

namespace composer {

EvalLoop::EvalLoop(State& state, Engine& engine, Logger& logger, EvalLoopOptions options)
    : state_(state), engine_(engine), logger_(logger), options_(options), precision_(state.precision, state.device) {
  for (const auto& e : state.evaluators) {
    due_.push_back(
        create_interval_scheduler(e.eval_interval.value_or(options_.eval_interval()),
                                  IntervalSchedulerOptions().checkpoint_events(false).final_events({Event::FIT_END})));
  }
}

namespace {

// Evaluator.auto_microbatching: runs the batch's microbatches, and when any rank runs out of memory puts the
// metrics back as they were before the batch, halves the evaluator's size and runs them again (EVAL_BATCH_START
// is not repeated, as in Composer). Logs trainer/<label>/device_eval_microbatch_size.
template <class RunMicrobatches>
void search_microbatch_size(Evaluator& evaluator, int64_t batch_samples, MetricMap& metrics, State& s, Logger& logger,
                            RunMicrobatches&& run_microbatches) {
  const MicrobatchSearch search(evaluator.label, s.device);
  const MetricStates before(metrics);
  for (;;) {
    bool out_of_memory = false;
    try {
      const dist::CollectiveCheck check_collectives([&search] { search.check_in_attempt(); });  // FSDP's gathers
      run_microbatches();
    } catch (const std::exception& e) {
      if (!is_out_of_memory(e)) throw;
      out_of_memory = true;
    }
    if (!search.any_out_of_memory(out_of_memory)) break;
    s.outputs = at::Tensor();
    release_cached_memory(s.device);
    before.restore();
    const int64_t from = MicrobatchSearch::used_size(evaluator.device_eval_microbatch_size.value_or(0), batch_samples);
    evaluator.device_eval_microbatch_size = MicrobatchSearch::halve(from, evaluator.label + " evaluation");
    if (dist::get_global_rank() == 0) {
      std::cerr << "composer: warning: out of memory evaluating " << evaluator.label << " at microbatch size " << from
                << "; redoing the batch with " << *evaluator.device_eval_microbatch_size << "\n";
    }
  }
  const int64_t used = MicrobatchSearch::used_size(evaluator.device_eval_microbatch_size.value_or(0), batch_samples);
  logger.log_metrics({{"trainer/" + evaluator.label + "/device_eval_microbatch_size", static_cast<double>(used)}});
}

}  // namespace

void EvalLoop::run(Evaluator& evaluator) {
  State& s = state_;
  detail::LoaderSwap swap(s);
  const int64_t subset =
      evaluator.subset_num_batches >= 0 ? evaluator.subset_num_batches : options_.subset_num_batches();
  s.set_dataloader(evaluator.dataloader.get(), evaluator.label, subset);
  s.eval_timestamp = Timestamp();
  at::NoGradGuard no_grad;
  s.model->eval();
  engine_.run_event(Event::EVAL_START);
  MetricMap& metrics = s.eval_metrics[evaluator.label];
  for (auto& [name, m] : metrics) m->reset();
  DataLoader& loader = *evaluator.dataloader;
  loader.set_epoch(s.timestamp.batch);
  loader.reset();
  auto batch_start = std::chrono::steady_clock::now();
  for (int64_t i = 0; !s.dataloader_len || i < *s.dataloader_len; ++i) {
    auto batch = loader.next();
    if (!detail::every_rank_has_batch(*s.strategy, batch.has_value(), "eval '" + evaluator.label + "'", i)) break;
    s.batch = loader.transform_batch(std::move(*batch)).to(s.device);
    engine_.run_event(Event::EVAL_BATCH_START);
    const Batch full = s.batch;
    auto run_microbatches = [&] {
      const int64_t mb_size = evaluator.device_eval_microbatch_size.value_or(0);
      // Unsplit on the CPU: the forward's arithmetic in cache-sized pieces (detail/cpu_eval_chunks.h); not while
      // automatic microbatching searches for the largest size that fits.
      const bool in_pieces = mb_size == 0 && s.device.is_cpu() && !evaluator.auto_microbatching;
      for (const Batch& mb :
           mb_size > 0 ? loader.split_batch(full, static_cast<double>(mb_size)) : std::vector<Batch>{full}) {
        s.batch = loader.transform_microbatch(mb);
        engine_.run_event(Event::EVAL_BEFORE_FORWARD);
        {
          auto scope = s.strategy->enter(dist::Phase::EVAL_FORWARD);
          auto autocast = precision_.enter();
          const Batch inputs = detail::forward_inputs(s.batch, *s.strategy);
          s.outputs = in_pieces ? detail::eval_forward_in_chunks(*s.model, inputs) : s.model->eval_forward(inputs);
        }
        engine_.run_event(Event::EVAL_AFTER_FORWARD);
        for (auto& [name, m] : metrics) s.model->update_metric(s.batch, s.outputs, *m);
      }
    };
    if (evaluator.auto_microbatching) {
      search_microbatch_size(evaluator, full.num_samples(), metrics, s, logger_, run_microbatches);
    } else {
      run_microbatches();
    }
    s.batch = full;
    const auto now = std::chrono::steady_clock::now();
    s.eval_timestamp = s.eval_timestamp.to_next_batch(std::llround(loader.num_samples_in_batch(full)),
                                                      loader.num_tokens_in_batch(full, TokenType::kTotal),
                                                      std::chrono::duration_cast<Seconds>(now - batch_start));
    batch_start = now;
    engine_.run_event(Event::EVAL_BATCH_END);
  }
  std::map<std::string, double> values;
  for (auto& [name, m] : metrics) {
    const double v = detail::compute_global(*m, *s.strategy);
    values["metrics/" + evaluator.label + "/" + name] = v;
    s.eval_metric_values[name] = v;
  }
  logger_.log_metrics(values);
  engine_.run_event(Event::EVAL_END);
}

void EvalLoop::run_due(Event event) {
  if (due_.size() != state_.evaluators.size()) {
    throw std::logic_error("EvalLoop: state.evaluators changed after the loop was built");
  }
  std::vector<size_t> due;
  for (size_t i = 0; i < state_.evaluators.size(); ++i)
    if (due_[i](state_, event)) due.push_back(i);
  if (due.empty()) return;
  engine_.run_event(Event::EVAL_BEFORE_ALL);
  for (size_t i : due) run(state_.evaluators[i]);
  engine_.run_event(Event::EVAL_AFTER_ALL);
}

}  // namespace composer
