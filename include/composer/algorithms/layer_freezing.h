// LayerFreezing: freezes the earliest layers progressively during training (Composer's LayerFreezing).
#pragma once

#include "composer/core/algorithm.h"
#include "composer/core/fields.h"

#include <torch/arg.h>
#include <torch/nn/module.h>

#include <string>
#include <utility>

namespace torch::optim {
class Optimizer;
}

namespace composer {
namespace functional {

/// Freezes the first layers of `model` for `current_duration` (the fraction of training done, in [0, 1]), as
/// Composer's freeze_layers: the layers are the leaf modules that hold parameters, depth first in registration
/// order; none is frozen up to freeze_start, then the frozen fraction grows linearly to freeze_level at the end of
/// training, and int(fraction * (layers - 1)) layers are frozen (the last layer never is). A frozen layer's
/// parameters stop requiring gradients, lose their gradient and leave `optimizer` (when given) with their state.
/// Returns {layers frozen, fraction frozen}. Throws std::invalid_argument for arguments outside [0, 1].
std::pair<int64_t, double> freeze_layers(torch::nn::Module& model, torch::optim::Optimizer* optimizer,
                                         double current_duration, double freeze_start = 0.5, double freeze_level = 1.0);

}  // namespace functional

namespace algorithms {

struct LayerFreezingOptions {
  /// Fraction of training before freezing begins, in [0, 1).
  TORCH_ARG(double, freeze_start) = 0.5;
  /// Fraction of the layers frozen at the end of training, in [0, 1].
  TORCH_ARG(double, freeze_level) = 1.0;

 public:
  void validate() const;
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("freeze_start", self.freeze_start_, "fraction of training before freezing begins, in [0, 1)");
    visit("freeze_level", self.freeze_level_, "fraction of the layers frozen at the end of training, in [0, 1]");
  }
};

/// EPOCH_END: freezes layers per the schedule of functional::freeze_layers and logs layer_freezing/layers_frozen
/// and layer_freezing/percentage_frozen. Some parameters then get no gradient (find_unused_parameters). As in
/// Composer, the checkpoint keeps no freezing state: a resumed run freezes again at its next EPOCH_END.
class LayerFreezing : public Algorithm {
 public:
  explicit LayerFreezing(LayerFreezingOptions options = LayerFreezingOptions());
  bool match(Event event, const State& state) override;
  std::optional<int> apply(Event event, State& state, Logger& logger) override;
  bool find_unused_parameters() const override { return true; }
  std::string repr() const override;
  const LayerFreezingOptions& options() const { return options_; }

 private:
  LayerFreezingOptions options_;
};

}  // namespace algorithms
}  // namespace composer
