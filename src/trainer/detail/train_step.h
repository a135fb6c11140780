// TrainStep: one optimisation step over state.batch, split into microbatches.
#pragma once

#include "trainer/detail/trainer_impl.h"

namespace composer::detail {

/// Runs BEFORE_TRAIN_BATCH ... AFTER_TRAIN_BATCH and the optimizer step for the batch in state.batch.
/// Each microbatch's loss is scaled by its share of the batch's samples, so the summed gradient equals the
/// full-batch gradient. Returns the batch loss (detached, the sample-weighted mean over microbatches).
/// Seam for automatic microbatching: microbatch_size is a parameter, and a retry with a smaller size starts again
/// at BEFORE_TRAIN_BATCH.
at::Tensor run_train_step(TrainerImpl& t, int64_t microbatch_size);

}  // namespace composer::detail
