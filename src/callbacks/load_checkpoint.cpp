#include "composer/callbacks/load_checkpoint.h"

#include "composer/checkpoint/checkpoint.h"
#include "composer/core/state.h"

#include <stdexcept>

namespace composer {

LoadCheckpoint::LoadCheckpoint(LoadCheckpointOptions options)
    : options_(std::move(options)),
      path_(required_value(options_.load_path(), "LoadCheckpoint", "load_path", "a checkpoint file")) {
  if (path_.empty()) throw std::invalid_argument("LoadCheckpoint.load_path is empty; expected a checkpoint file");
}

void LoadCheckpoint::run_event(Event event, State& state, Logger& logger) {
  if (event == options_.event()) {
    CheckpointLoadOptions load;
    load.weights_only = options_.load_weights_only();
    load.strict_model = options_.strict_model_weights();
    load.ignore_keys = options_.ignore_keys();
    apply_checkpoint(state, read_checkpoint(path_), load, path_);
  }
  Callback::run_event(event, state, logger);
}

}  // namespace composer
