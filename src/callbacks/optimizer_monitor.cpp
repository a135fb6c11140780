#include "composer/callbacks/optimizer_monitor.h"

#include "composer/core/logger.h"
#include "composer/core/state.h"
#include "composer/dist/strategy.h"
#include "composer/models/composer_model.h"
#include "composer/optim/optimizer.h"

#include <ATen/ATen.h>

#include <cmath>
#include <stdexcept>

namespace composer {

OptimizerMonitor::OptimizerMonitor(OptimizerMonitorOptions options) : options_(options) {
  if (options_.batch_log_interval() < 1)
    throw std::invalid_argument("OptimizerMonitor.batch_log_interval is " +
                                std::to_string(options_.batch_log_interval()) + ", expected >= 1");
}

void OptimizerMonitor::batch_end(State& state, Logger& logger) {
  if (state.timestamp.batch % options_.batch_log_interval() != 0 || !state.model) return;
  const auto* reporter = dynamic_cast<const optim::Optimizer*>(state.optimizer.get());
  std::map<std::string, double> metrics;
  at::NoGradGuard no_grad;
  // The strategy answers for the gradients it holds (FSDP: the shards, reduced over the ranks).
  const auto norms = state.strategy ? state.strategy->gradient_norms(*state.model)
                                    : dist::SingleProcess().gradient_norms(*state.model);
  for (const auto& item : state.model->named_parameters()) {
    const at::Tensor& p = item.value();
    if (!p.requires_grad() || !norms.count(item.key())) continue;
    if (reporter && options_.log_optimizer_metrics() && p.grad().defined())
      reporter->report_per_parameter_metrics(p, item.key(), metrics);
    const std::string key = "l2_norm/grad/" + item.key();
    if (!metrics.count(key)) metrics[key] = norms.at(item.key());
  }
  double squares = 0.0;
  for (const auto& [key, value] : metrics)
    if (key.rfind("l2_norm/grad", 0) == 0) squares += value * value;
  metrics["l2_norm/grad/global"] = std::sqrt(squares);
  logger.log_metrics(metrics);
}

}  // namespace composer
