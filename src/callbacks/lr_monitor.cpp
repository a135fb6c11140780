#include "composer/callbacks/lr_monitor.h"

#include "composer/core/logger.h"
#include "composer/core/state.h"
#include "composer/utils/type_name.h"

#include <torch/optim/optimizer.h>

namespace composer {

void LRMonitor::batch_end(State& state, Logger& logger) {
  if (!state.optimizer) return;
  const std::string prefix = "lr-" + class_name_of(*state.optimizer) + "/group";
  std::map<std::string, double> lrs;
  const auto& groups = state.optimizer->param_groups();
  for (size_t i = 0; i < groups.size(); ++i) lrs[prefix + std::to_string(i)] = groups[i].options().get_lr();
  logger.log_metrics(lrs);
}

}  // namespace composer
