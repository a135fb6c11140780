#include "composer/algorithms/layer_freezing.h"

#include "algorithms/detail/common.h"
#include "composer/algorithms/module_surgery.h"
#include "composer/core/fields.h"
#include "composer/core/logger.h"
#include "composer/core/state.h"
#include "composer/models/composer_model.h"

#include <torch/optim/optimizer.h>

#include <vector>

namespace composer {
namespace functional {
namespace {

// Leaf modules holding parameters, depth first (Composer's _get_layers).
void collect_layers(torch::nn::Module& module, std::vector<torch::nn::Module*>& out) {
  const auto children = module.children();
  if (children.empty() && !module.parameters().empty()) {
    out.push_back(&module);
    return;
  }
  for (const auto& child : children) collect_layers(*child, out);
}

// The frozen fraction: 0 up to freeze_start, then linear up to freeze_level at the end (Composer's _freeze_schedule).
double freeze_fraction(double current_duration, double freeze_start, double freeze_level) {
  if (current_duration <= freeze_start) return 0.0;
  return freeze_level * ((current_duration - freeze_start) / (1.0 - freeze_start));
}

}  // namespace

std::pair<int64_t, double> freeze_layers(torch::nn::Module& model, torch::optim::Optimizer* optimizer,
                                         double current_duration, double freeze_start, double freeze_level) {
  algorithms::detail::require_range("freeze_layers", "current_duration", current_duration, 0.0, 1.0);
  algorithms::detail::require_range("freeze_layers", "freeze_start", freeze_start, 0.0, 1.0, false, true);
  algorithms::detail::require_range("freeze_layers", "freeze_level", freeze_level, 0.0, 1.0);
  std::vector<torch::nn::Module*> layers;
  collect_layers(model, layers);
  const double fraction = freeze_fraction(current_duration, freeze_start, freeze_level);
  const int64_t candidates = layers.empty() ? 0 : static_cast<int64_t>(layers.size()) - 1;
  const auto depth = static_cast<int64_t>(fraction * static_cast<double>(candidates));
  for (int64_t i = 0; i < depth; ++i) {
    const auto params = layers[static_cast<size_t>(i)]->parameters();
    if (optimizer) remove_params_from_optimizer(params, *optimizer);
    for (auto p : params) {
      p.requires_grad_(false);
      p.mutable_grad().reset();
    }
  }
  return {depth, fraction};
}

}  // namespace functional

namespace algorithms {

void LayerFreezingOptions::validate() const {
  detail::require_range("LayerFreezing", "freeze_start", freeze_start_, 0.0, 1.0, false, true);
  detail::require_range("LayerFreezing", "freeze_level", freeze_level_, 0.0, 1.0);
}

LayerFreezing::LayerFreezing(LayerFreezingOptions options) : options_(options) { options_.validate(); }

bool LayerFreezing::match(Event event, const State& state) {
  // Matches EPOCH_END only, as Composer's; INIT is where it refuses what it cannot do. Under FSDP the optimizer steps
  // flat shards laid out when training starts: a layer frozen at an epoch's end would still be stepped (zero
  // gradients, momentum and weight decay), unlike one process's run.
  if (event == Event::INIT && state.strategy && state.strategy->holds_gradients()) {
    throw std::invalid_argument(
        "LayerFreezing: not supported under FSDP (parallelism_config.fsdp): the optimizer steps flat shards laid out "
        "when training starts, so layers frozen later would still be updated; freeze them before building the "
        "Trainer (requires_grad false: FSDP shards them frozen), or use DDP");
  }
  return event == Event::EPOCH_END;
}

std::optional<int> LayerFreezing::apply(Event, State& state, Logger& logger) {
  if (!state.model) return std::nullopt;
  const double elapsed = std::min(1.0, state.get_elapsed_duration().value_or(0.0));
  const auto [depth, fraction] = functional::freeze_layers(*state.model, state.optimizer.get(), elapsed,
                                                           options_.freeze_start(), options_.freeze_level());
  logger.log_metrics(
      {{"layer_freezing/layers_frozen", static_cast<double>(depth)}, {"layer_freezing/percentage_frozen", fraction}});
  return std::nullopt;
}

std::string LayerFreezing::repr() const { return options_repr("LayerFreezing", options_); }

}  // namespace algorithms
}  // namespace composer
