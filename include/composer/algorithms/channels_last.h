// ChannelsLast: stores 4-D weights (and so convolution activations) in NHWC order, which tensor cores and oneDNN
// prefer (Composer's ChannelsLast).
#pragma once

#include "composer/core/algorithm.h"

#include <torch/nn/module.h>

namespace composer {
namespace functional {

/// Converts every 4-D parameter and buffer of `model` to channels_last in place (Module::to(memory_format=...));
/// tensor identities are kept, so an optimizer built earlier stays valid. Convolutions then produce channels-last
/// activations.
void apply_channels_last(torch::nn::Module& model);

}  // namespace functional

namespace algorithms {

/// INIT: functional::apply_channels_last on the model.
/// ChannelsLast has no hyperparameters; the empty field list keeps the registry uniform.
struct ChannelsLastOptions {
  template <class Self, class Visit>
  static void for_each_field(Self&, Visit&&) {}
};

class ChannelsLast : public Algorithm {
 public:
  explicit ChannelsLast(ChannelsLastOptions = {}) {}
  bool match(Event event, const State& state) override;
  std::optional<int> apply(Event event, State& state, Logger& logger) override;
};

}  // namespace algorithms
}  // namespace composer
