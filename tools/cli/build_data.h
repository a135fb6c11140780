// Data sets and loaders from a config section (train_data / eval_data).
#pragma once

#include "cli/config_node.h"
#include "composer/data/data_loader.h"

#include <memory>

namespace composer::cli {

struct DataSpec {
  std::shared_ptr<DataLoader> loader;
  bool language = false;    // batches of input_ids / labels
  int64_t vocab_size = 0;   // language data
  int64_t num_classes = 0;  // image data
  int64_t channels = 0;
  int64_t image_size = 0;  // image data: height = width
};

/// Builds the loader described by `node`. `train` selects the default split and turns augmentation on.
DataSpec build_data(const ConfigNode& node, bool train, uint64_t seed);

}  // namespace composer::cli
