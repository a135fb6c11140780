#include "composer/callbacks/nan_monitor.h"

#include "composer/core/state.h"

#include <ATen/ATen.h>

#include <stdexcept>
#include <string>

namespace composer {

void NaNMonitor::after_loss(State& state, Logger&) {
  const std::string batch = " (batch " + std::to_string(state.timestamp.batch + 1) + ")";
  const bool named = state.losses.size() > 1 || (state.losses.size() == 1 && !state.losses.count("total"));
  if (!named) {
    if (state.loss.defined() && state.loss.isnan().any().item<bool>())
      throw std::runtime_error("NaNMonitor: the training loss contains a NaN" + batch);
    return;
  }
  for (const auto& [name, loss] : state.losses) {
    if (loss.defined() && loss.isnan().any().item<bool>())
      throw std::runtime_error("NaNMonitor: the training loss '" + name + "' contains a NaN" + batch);
  }
}

}  // namespace composer
