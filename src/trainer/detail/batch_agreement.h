// Ranks agree before each batch that every one of them has it, so that data that does not split evenly over the
// ranks ends a pass on all of them together instead of leaving one rank alone in the next collective.
#pragma once

#include "composer/dist/strategy.h"

#include <cstdint>
#include <string>

namespace composer::detail {

/// Whether every rank has a batch, given whether this one has (`has_batch`); a collective when the strategy spans
/// several ranks. When only some have one, rank 0 warns once per `loader` label that the pass ends there on every
/// rank: `index` is the 0-based batch of the pass the shorter ranks lacked.
bool every_rank_has_batch(dist::Strategy& strategy, bool has_batch, const std::string& loader, int64_t index);

}  // namespace composer::detail
