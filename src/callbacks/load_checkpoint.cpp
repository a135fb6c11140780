#include "composer/callbacks/load_checkpoint.h"

#include "composer/checkpoint/checkpoint.h"
#include "composer/checkpoint/resume.h"
#include "composer/core/state.h"
#include "composer/storage/object_store.h"

#include <stdexcept>

namespace composer {

LoadCheckpoint::LoadCheckpoint(LoadCheckpointOptions options)
    : options_(std::move(options)),
      path_(required_value(options_.load_path(), "LoadCheckpoint", "load_path", "a checkpoint file")) {
  if (path_.empty()) throw std::invalid_argument("LoadCheckpoint.load_path is empty; expected a checkpoint file");
  (void)format_load_path(path_, "run");  // a placeholder it cannot fill is an error now, not at the event
  (void)is_object_store_uri(path_);      // and so is a mistyped URI ("s3:/bucket/x")
}

void LoadCheckpoint::run_event(Event event, State& state, Logger& logger) {
  if (event == options_.event()) {
    CheckpointLoadOptions load;
    load.weights_only = options_.load_weights_only();
    load.strict_model = options_.strict_model_weights();
    load.ignore_keys = options_.ignore_keys();
    load_checkpoint_path(state, path_, load);  // a file, a sharded folder or a URI, as the Trainer's load_path
  }
  Callback::run_event(event, state, logger);
}

}  // namespace composer
