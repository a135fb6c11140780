// The target / loss half shared by MixUp and CutMix: at BEFORE_LOSS the targets become
// keep * onehot(y) + (1 - keep) * onehot(y[perm]); with interpolate_loss, at BEFORE_BACKWARD the loss becomes
// keep * loss + (1 - keep) * loss(outputs, y[perm]).
#pragma once

#include "composer/core/event.h"
#include "composer/data/batch.h"

namespace composer {
struct State;
}

namespace composer::algorithms::detail {

struct MixedTargets {
  at::Tensor original;  // y of the microbatch
  at::Tensor permuted;  // y[perm]
  double keep = 1.0;    // weight of the original targets
};

bool mixing_match(Event event, bool interpolate_loss);
void mix_targets_or_loss(Event event, State& state, const MixedTargets& mixed, const BatchKey& target_key);

}  // namespace composer::algorithms::detail
