// NaNMonitor: stops the run with an error when a training loss is NaN (Composer's NaNMonitor).
#pragma once

#include "composer/core/callback.h"

namespace composer {

/// At AFTER_LOSS, throws std::runtime_error naming the loss ("total" or the model's named losses) and the batch when
/// any element of it is NaN. Infinite losses pass, as in Composer.
class NaNMonitor : public Callback {
 public:
  void after_loss(State& state, Logger& logger) override;
};

}  // namespace composer
