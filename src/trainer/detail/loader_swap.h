// LoaderSwap: what the eval and predict loops put back when they end.
#pragma once

#include "composer/core/state.h"
#include "composer/models/composer_model.h"

#include <optional>
#include <string>

namespace composer::detail {

// Restores the train loader and the model's training mode when an eval or predict loop ends (or throws).
class LoaderSwap {
 public:
  explicit LoaderSwap(State& s)
      : s_(s),
        loader_(s.dataloader),
        label_(s.dataloader_label),
        len_(s.dataloader_len),
        training_(s.model->is_training()) {}
  ~LoaderSwap() {
    s_.dataloader = loader_;
    s_.dataloader_label = label_;
    s_.dataloader_len = len_;
    s_.model->train(training_);
  }

 private:
  State& s_;
  DataLoader* loader_;
  std::string label_;
  std::optional<int64_t> len_;
  bool training_;
};

}  // namespace composer::detail
