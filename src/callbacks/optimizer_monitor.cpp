#include "composer/callbacks/optimizer_monitor.h"

#include "composer/core/logger.h"
#include "composer/core/state.h"
#include "composer/dist/strategy.h"
#include "composer/models/composer_model.h"
#include "composer/optim/optimizer.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <stdexcept>

namespace composer {

OptimizerMonitor::OptimizerMonitor(OptimizerMonitorOptions options) : options_(options) {
  if (options_.batch_log_interval() < 1)
    throw std::invalid_argument("OptimizerMonitor.batch_log_interval is " +
                                std::to_string(options_.batch_log_interval()) + ", expected >= 1");
}

void OptimizerMonitor::batch_end(State& state, Logger& logger) {
  if (state.timestamp.batch % options_.batch_log_interval() != 0 || !state.model) return;
  const auto* reporter =
      options_.log_optimizer_metrics() ? dynamic_cast<const optim::Optimizer*>(state.optimizer.get()) : nullptr;
  const std::vector<std::string> keys = reporter ? reporter->per_parameter_norm_keys() : std::vector<std::string>{};
  // Per part of a parameter: the gradient's squares, whether it has a gradient, whether the optimizer reported,
  // then the optimizer's squares. The strategy adds the parts (FSDP: every rank's, reduced over the ranks).
  constexpr size_t kGrad = 0, kHasGrad = 1, kReported = 2, kOptimizer = 3;
  const size_t width = kOptimizer + keys.size();
  // Where the optimizer reports the gradient's norm itself (DecoupledAdamW), its squares are the gradient column.
  const auto grad_key = std::find(keys.begin(), keys.end(), "l2_norm/grad") - keys.begin();
  const bool optimizer_has_grad = grad_key < static_cast<std::ptrdiff_t>(keys.size());
  at::NoGradGuard no_grad;
  dist::SingleProcess single;
  dist::Strategy& strategy = state.strategy ? *state.strategy : single;
  const auto sums = strategy.parameter_sums(*state.model, width, [&](const at::Tensor& stepped, int64_t b, int64_t e) {
    std::vector<double> values(width, 0.0);
    if (!stepped.grad().defined()) return values;  // as Composer, only parameters with a gradient
    values[kHasGrad] = 1;
    const auto squares = reporter ? reporter->per_parameter_squares(stepped, b, e) : std::nullopt;
    if (squares) {
      values[kReported] = 1;
      for (size_t i = 0; i < keys.size() && i < squares->size(); ++i) values[kOptimizer + i] = (*squares)[i];
    }
    values[kGrad] =
        squares && optimizer_has_grad ? values[kOptimizer + grad_key] : dist::squared_norm(stepped.grad(), b, e);
    return values;
  });
  std::map<std::string, double> metrics;
  for (const auto& [name, s] : sums) {
    if (s[kHasGrad] == 0) continue;
    if (s[kReported] > 0)
      for (size_t i = 0; i < keys.size(); ++i) metrics[keys[i] + "/" + name] = std::sqrt(s[kOptimizer + i]);
    metrics.try_emplace("l2_norm/grad/" + name, std::sqrt(s[kGrad]));
  }
  double squares = 0.0;
  for (const auto& [key, value] : metrics)
    if (key.rfind("l2_norm/grad", 0) == 0) squares += value * value;
  metrics["l2_norm/grad/global"] = std::sqrt(squares);
  logger.log_metrics(metrics);
}

}  // namespace composer
