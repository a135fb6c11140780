// LoadCheckpoint: loads a checkpoint into the State at a chosen event (Composer's LoadCheckpoint), for example a
// pretrained model's weights at BEFORE_LOAD, or another run's weights at FIT_START.
#pragma once

#include "composer/core/callback.h"
#include "composer/core/event.h"
#include "composer/core/fields.h"

#include <torch/arg.h>

#include <string>
#include <vector>

namespace composer {

struct LoadCheckpointOptions {
  /// Required: the checkpoint file.
  TORCH_ARG(Required<std::string>, load_path);
  /// Load only the model weights.
  TORCH_ARG(bool, load_weights_only) = false;
  /// Every model key must match (names and shapes).
  TORCH_ARG(bool, strict_model_weights) = true;
  /// Glob patterns over "/"-joined paths to drop before loading ("state/optimizers", "state/model/fc.*", "rng").
  TORCH_ARG(std::vector<std::string>, ignore_keys) = {};
  /// The event at which to load.
  TORCH_ARG(Event, event) = Event::BEFORE_LOAD;

 public:
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("load_path", self.load_path_, "required: the checkpoint file");
    visit("load_weights_only", self.load_weights_only_, "load only the model weights");
    visit("strict_model_weights", self.strict_model_weights_, "every model key must match");
    visit("ignore_keys", self.ignore_keys_, "glob patterns of checkpoint paths to drop before loading");
    visit("event", self.event_, "the event at which to load, such as 'before_load' or 'fit_start'");
  }
};

/// At `event`, reads `load_path` and applies it to the State as the Trainer's load_path does (the checkpoint's RNG
/// state is not restored, as in Composer). A missing, damaged or mismatching checkpoint is a CheckpointError naming
/// the file, raised at that event.
class LoadCheckpoint : public Callback {
 public:
  /// Throws std::invalid_argument when load_path is unset or empty.
  explicit LoadCheckpoint(LoadCheckpointOptions options);
  void run_event(Event event, State& state, Logger& logger) override;

 private:
  LoadCheckpointOptions options_;
  std::string path_;
};

}  // namespace composer
