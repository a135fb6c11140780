// The loss registry (core/registry.h; Composer's composer.loss.loss_registry): a loss function by name for configs,
// e.g. a vision model's `loss_name: binary_cross_entropy_with_logits`, with its options as fields.
#pragma once

#include "composer/core/registry.h"

#include <ATen/core/Tensor.h>

#include <functional>

namespace composer {

/// A loss of (outputs, targets), as ComposerClassifier takes one.
using LossFunction = std::function<at::Tensor(const at::Tensor& input, const at::Tensor& target)>;
using LossRegistry = Registry<LossFunction>;
/// soft_cross_entropy, binary_cross_entropy_with_logits (Composer's registry) and dice_loss.
const LossRegistry& loss_registry();

}  // namespace composer
