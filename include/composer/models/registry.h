// The model registry (core/registry.h): the built-in models by config name ("mlp", "cifar_resnet", "gpt"), each
// wrapped for the Trainer. A model's shape defaults follow its data (ModelInputs), so a config names only what
// differs: `{name: mlp}` on 1x8x8 images with 4 classes is an MLP from 64 features to 4 logits.
#pragma once

#include "composer/core/registry.h"
#include "composer/models/composer_model.h"

#include <cstdint>

namespace composer::models {

/// What the data says about the inputs (0: unknown, the field list's default is used).
struct ModelInputs {
  int64_t channels = 0;
  int64_t image_size = 0;
  int64_t num_classes = 0;
  int64_t vocab_size = 0;
};

using ModelRegistry = Registry<ComposerModel, const ModelInputs&>;
const ModelRegistry& model_registry();

}  // namespace composer::models
