// The loader whose DataSpec hooks (split_batch, samples and tokens per batch, transforms) a loop unit asks: the one
// it reads, or the defaults when a unit runs without one (a TrainStep driven by hand).
#pragma once

#include "composer/data/data_loader.h"

namespace composer::detail {

const DataLoader& data_hooks(const DataLoader* loader);

}  // namespace composer::detail
