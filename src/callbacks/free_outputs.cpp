#include "composer/callbacks/free_outputs.h"

#include "callbacks/detail/monitored_metric.h"
#include "composer/core/state.h"

#include <ATen/ATen.h>

#include <stdexcept>
#include <string>

namespace composer {

void FreeOutputs::fit_start(State& state, Logger&) {
  if (state.train_metrics.empty()) return;
  const std::string names = detail::join_keys(state.train_metrics);
  throw std::invalid_argument(
      "FreeOutputs frees the outputs that training metrics are computed from, and the model "
      "has training metrics (" +
      names + "); remove FreeOutputs or the training metrics");
}

void FreeOutputs::after_loss(State& state, Logger&) {
  state.outputs = state.outputs.defined() ? at::empty({0}, state.outputs.options()) : at::empty({0});
}

}  // namespace composer
