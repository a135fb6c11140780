#include "composer/trainer/train_step.h"

#include "composer/core/logger.h"
#include "composer/core/state.h"
#include "composer/dist/strategy.h"
#include "trainer/detail/eager_step.h"
#include "trainer/detail/graphed_step.h"
#include "trainer/detail/searching_step.h"

#include <stdexcept>

namespace composer {

TrainStep::TrainStep(State& state, Engine& engine, Logger& logger, TrainStepOptions options)
    : state_(state), logger_(logger), options_(options), precision_(state.precision, state.device) {
  if (options_.cuda_graph_warmup_steps() < 1) {
    throw std::invalid_argument(
        "cuda_graph_warmup_steps must be >= 1 (an eager step creates the optimizer's state), "
        "got " +
        std::to_string(options_.cuda_graph_warmup_steps()));
  }
  eager_ = std::make_unique<detail::EagerStep>(state, engine, precision_, options_);
  search_ = std::make_unique<detail::SearchingStep>(state, *eager_);
  if (options_.cuda_graph())
    graph_ = std::make_unique<detail::GraphedStep>(state, engine, precision_, *eager_, options_);
}

TrainStep::~TrainStep() = default;

std::vector<std::string> TrainStep::cuda_graph_obstacles(const State& state) {
  return detail::GraphedStep::obstacles(state);
}

std::map<std::string, at::Tensor> TrainStep::run() {
  State& s = state_;
  if (!s.model || !s.optimizer)
    throw std::invalid_argument("TrainStep.run: state.model and state.optimizer must be set");
  if (precision_.uses_grad_scaling() && !s.scaler)
    throw std::invalid_argument("TrainStep.run: amp_fp16 needs state.scaler");
  s.strategy->begin_step();
  const int64_t batch_samples = s.batch.num_samples();
  int closure_runs = 0;
  const std::map<std::string, at::Tensor> totals = graph_                 ? graph_->run()
                                                   : s.auto_microbatching ? search_->run()
                                                                          : eager_->run(nullptr, closure_runs);
  const int64_t size = s.device_train_microbatch_size;
  logger_.log_metrics({{"trainer/device_train_microbatch_size",
                        s.device_train_microbatch_fraction > 0
                            ? s.device_train_microbatch_fraction
                            : static_cast<double>(MicrobatchSearch::used_size(size, batch_samples))}});
  return totals;
}

}  // namespace composer
