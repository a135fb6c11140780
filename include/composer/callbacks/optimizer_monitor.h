// OptimizerMonitor: L2 norms of the gradients (per parameter and global) and the optimizer's own per-parameter
// metrics (Composer's OptimizerMonitor).
#pragma once

#include "composer/core/callback.h"

#include <torch/arg.h>

namespace composer {

struct OptimizerMonitorOptions {
  /// Also log the optimizer's report_per_parameter_metrics (DecoupledAdamW: moment, param and update norms).
  TORCH_ARG(bool, log_optimizer_metrics) = true;
  /// Log at BATCH_END when batch % batch_log_interval == 0.
  TORCH_ARG(int64_t, batch_log_interval) = 10;

 public:
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("log_optimizer_metrics", self.log_optimizer_metrics_, "also log the optimizer's per-parameter metrics");
    visit("batch_log_interval", self.batch_log_interval_, "log every this many batches");
  }
};

/// At BATCH_END every batch_log_interval batches, for each trainable parameter with a gradient (named as in the
/// model, such as "module.0.weight"): l2_norm/grad/<name>, and with log_optimizer_metrics whatever the optimizer
/// reports (optim::Optimizer::per_parameter_norm_keys: l2_norm/moment, l2_norm/param, l2_norm/update for
/// DecoupledAdamW); then l2_norm/grad/global, the square root of the sum of the squared l2_norm/grad values.
/// Gradients are those of the step just taken (after the data-parallel all-reduce). Under FSDP each norm is over
/// the whole parameter, every rank's part of it (Strategy::parameter_sums, one all-reduce that every rank joins).
class OptimizerMonitor : public Callback {
 public:
  /// Throws std::invalid_argument for a batch_log_interval below 1.
  explicit OptimizerMonitor(OptimizerMonitorOptions options = {});
  void batch_end(State& state, Logger& logger) override;

 private:
  OptimizerMonitorOptions options_;
};

}  // namespace composer
