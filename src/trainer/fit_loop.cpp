#include "composer/trainer/fit_loop.h"

#include "composer/core/algorithm.h"
#include "composer/core/engine.h"
#include "composer/core/logger.h"
#include "composer/core/state.h"
#include "composer/dist/env.h"
#include "composer/models/composer_model.h"
#include "composer/trainer/eval_loop.h"
#include "composer/trainer/train_epoch_loop.h"

#include <torch/torch.h>

namespace composer {

FitLoop::FitLoop(State& state, Engine& engine, Logger& logger, TrainEpochLoop& epoch, EvalLoop& eval,
                 FitLoopOptions options)
    : state_(state), engine_(engine), logger_(logger), epoch_(epoch), eval_(eval), options_(std::move(options)) {}

void FitLoop::resume_from(ResumePoint point) { resume_ = std::move(point); }

void FitLoop::run() {
  State& s = state_;
  if (!s.train_dataloader || !s.max_duration) {
    throw std::invalid_argument("FitLoop.run: state.train_dataloader and state.max_duration must be set");
  }
  nlohmann::json enabled;
  for (const auto& a : s.algorithms) enabled["enabled_algorithms/" + a->name()] = true;
  if (!enabled.empty()) logger_.log_hyperparameters(enabled);
  s.set_dataloader(s.train_dataloader.get(), options_.train_dataloader_label(), options_.train_subset_num_batches());
  engine_.run_event(Event::FIT_START);
  resume_.restore(dist::get_global_rank());
  resume_ = ResumePoint();
  s.model->train();
  if (s.timestamp.batch == 0) epoch_.step_schedulers();
  while (s.timestamp < *s.max_duration) epoch_.run();
  // Composer's final time values: the epoch and the batch-level counters.
  logger_.log_metrics({{"time/epoch", double(s.timestamp.epoch)}});
  epoch_.log_batch_time();
  engine_.run_event(Event::FIT_END);
  eval_.run_due(Event::FIT_END);
  s.optimizer->zero_grad(/*set_to_none=*/true);  // release the last step's gradients
}

}  // namespace composer
