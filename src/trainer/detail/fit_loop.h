// The fit loop and its train-epoch loop (Composer's _train_loop).
#pragma once

#include "trainer/detail/trainer_impl.h"

namespace composer::detail {

/// Trains until state.max_duration: FIT_START, epochs of batches, FIT_END, the final evaluation.
/// Requires: state.train_dataloader, state.optimizer and state.max_duration set, and not yet reached.
void run_fit_loop(TrainerImpl& t);

}  // namespace composer::detail
