// Data sets and loaders from a config section (train_data / eval_data), built by the library's data set registry.
#pragma once

#include "cli/config_node.h"
#include "composer/datasets/registry.h"

#include <cstdint>
#include <utility>

namespace composer::cli {

using DataSpec = datasets::DataSource;

/// Builds the loader described by `node` (`dataset: <name>` and its keys). `train` selects the default split,
/// sharding and shuffling and turns augmentation on; `seed` is the default loader seed; `place`: the training data's
/// (num_replicas, rank), {-1, -1} for the world size and this rank.
DataSpec build_data(const ConfigNode& node, bool train, uint64_t seed, std::pair<int64_t, int64_t> place = {-1, -1});

}  // namespace composer::cli
