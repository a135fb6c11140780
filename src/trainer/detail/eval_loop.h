// Eval and predict loops.
#pragma once

#include "trainer/detail/trainer_impl.h"

namespace composer::detail {

/// Evaluates one evaluator: EVAL_START, per batch EVAL_BATCH_START / EVAL_BEFORE_FORWARD / EVAL_AFTER_FORWARD
/// (per eval microbatch) / EVAL_BATCH_END, logs metrics/<label>/<Name>, EVAL_END. The train loader and the
/// model's mode are restored afterwards.
void run_eval_loop(TrainerImpl& t, Evaluator& evaluator);

/// Runs the evaluators due at `event` during fit, wrapped in EVAL_BEFORE_ALL / EVAL_AFTER_ALL.
void run_due_evaluators(TrainerImpl& t, Event event);

/// PREDICT_START, per batch PREDICT_BATCH_START / PREDICT_BEFORE_FORWARD / PREDICT_AFTER_FORWARD /
/// PREDICT_BATCH_END, PREDICT_END. Returns the outputs on the CPU.
std::vector<at::Tensor> run_predict_loop(TrainerImpl& t, DataLoader& loader, int64_t subset_num_batches);

}  // namespace composer::detail
