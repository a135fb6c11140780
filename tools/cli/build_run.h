// A whole run (model, data, optimizer, schedulers, callbacks, loggers, trainer settings) from a YAML config.
#pragma once

#include "cli/build_data.h"
#include "cli/config_node.h"
#include "composer/trainer/trainer_options.h"

#include <memory>
#include <string>

namespace composer::cli {

struct RunSpec {
  std::unique_ptr<TrainerOptions> options;
  DataSpec train;
  DataSpec eval;
  /// Paths of the file loggers, resolved after the run name is known.
  std::vector<std::string> log_file_patterns;
};

/// Validates everything before anything trains; throws ConfigError naming the key path.
/// `need_train_data`: train requires train_data; eval does not.
RunSpec build_run(const YAML::Node& root, bool need_train_data);

/// The model of a `model:` section, its shape defaults following `data` (an empty DataSpec: the field list's).
std::shared_ptr<ComposerModel> build_model(const ConfigNode& node, const DataSpec& data);

}  // namespace composer::cli
