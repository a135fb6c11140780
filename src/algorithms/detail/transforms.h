// Data-loader transforms made by algorithms (AugMix, RandAugment, sample-wise ColOut) and their installation at
// FIT_START.
#pragma once

#include "composer/data/dataset_loader.h"

#include <functional>
#include <string>

namespace composer {
struct State;
}

namespace composer::algorithms::detail {

/// A BatchTransform applying `fn` to each image [C, H, W] of the batch's input (position 0) and stacking the results.
BatchTransform per_image_transform(std::function<at::Tensor(const at::Tensor& image, at::Generator& gen)> fn);

/// Puts `transform` in front of the training DatasetLoader's transforms (Composer inserts its PIL transforms before
/// ToTensor). Throws naming `algorithm` when there is no training loader or it is not a DatasetLoader.
void add_train_transform(State& state, const std::string& algorithm, BatchTransform transform);

}  // namespace composer::algorithms::detail
