// FreeOutputs: drops the model's outputs after the loss to lower peak memory (Composer's FreeOutputs).
#pragma once

#include "composer/core/callback.h"

namespace composer {

/// At AFTER_LOSS, replaces state.outputs with an empty tensor (Composer's torch.Tensor()). Training metrics are
/// computed from those outputs, so FIT_START refuses a model with training metrics (Composer would fail later, at the
/// first metric update).
class FreeOutputs : public Callback {
 public:
  void fit_start(State& state, Logger& logger) override;
  void after_loss(State& state, Logger& logger) override;
};

}  // namespace composer
