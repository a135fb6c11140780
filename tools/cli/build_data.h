// Data sets and loaders from a config section (train_data / eval_data), built by the library's data set registry.
#pragma once

#include "cli/config_node.h"
#include "composer/datasets/registry.h"

namespace composer::cli {

using DataSpec = datasets::DataSource;

/// Builds the loader described by `node` (`dataset: <name>` and its keys). `train` selects the default split,
/// sharding and shuffling and turns augmentation on; `seed` is the default loader seed.
DataSpec build_data(const ConfigNode& node, bool train, uint64_t seed);

}  // namespace composer::cli
