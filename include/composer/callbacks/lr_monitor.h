#pragma once

#include "composer/core/callback.h"

namespace composer {

/// Logs lr-<OptimizerClass>/group<i> at every BATCH_END.
class LRMonitor : public Callback {
 public:
  void batch_end(State& state, Logger& logger) override;
};

}  // namespace composer
