#include "algorithms/detail/mixing.h"

#include "composer/algorithms/label_smoothing.h"
#include "composer/core/state.h"
#include "composer/models/composer_model.h"

#include <torch/torch.h>

namespace composer::algorithms::detail {

bool mixing_match(Event event, bool interpolate_loss) {
  return event == Event::BEFORE_FORWARD || event == (interpolate_loss ? Event::BEFORE_BACKWARD : Event::BEFORE_LOSS);
}

void mix_targets_or_loss(Event event, State& state, const MixedTargets& mixed, const BatchKey& target_key) {
  if (event == Event::BEFORE_LOSS) {
    const at::Tensor y = functional::ensure_targets_one_hot(state.outputs, mixed.original);
    const at::Tensor y_perm = functional::ensure_targets_one_hot(state.outputs, mixed.permuted);
    state.batch.set(target_key, y * mixed.keep + y_perm * (1.0 - mixed.keep));
  } else if (event == Event::BEFORE_BACKWARD) {
    Batch permuted = state.batch;
    permuted.set(target_key, mixed.permuted);
    const at::Tensor other = state.model->loss(state.outputs, permuted);
    state.loss = state.loss * mixed.keep + other * (1.0 - mixed.keep);
  }
}

}  // namespace composer::algorithms::detail
