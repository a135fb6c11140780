// The State codec: State to and from the "state" dict of a checkpoint, in Composer's keys (model, optimizers,
// algorithms, callbacks, scaler, timestamp, train_metrics, rank_zero_seed, run_name, metadata). Plain tensors and
// primitives, so Python's torch.load reads it as a dict.
#pragma once

#include <ATen/core/ivalue.h>

namespace composer {

struct State;

/// The serialisable part of `state`. The optimizer's state is keyed by parameter name, as Composer keys it.
c10::IValue state_dict(const State& state);
/// Restores what state_dict() wrote. The model loads first (strict_model: every key and shape must match); entries
/// this State has no owner for (an algorithm or callback the run lacks, Composer's extra keys) are skipped; a missing
/// optimizer state is an error naming it. Throws std::invalid_argument.
void load_state_dict(State& state, const c10::IValue& saved, bool strict_model = true);

}  // namespace composer
