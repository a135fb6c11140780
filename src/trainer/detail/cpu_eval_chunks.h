// An evaluation forward on the CPU in pieces. A batch of more than kCpuEvalChunk samples runs through the model
// kCpuEvalChunk samples at a time and the outputs are concatenated, so that each piece's activations stay in the
// caches: the Fashion-MNIST CNN's evaluation at batch 1000 took 2.1 s per 10,000 images whole and 1.3 s in pieces of
// 250 (bench/results/time_to_accuracy.md). The events, the metrics and State::outputs see the whole batch, as in
// Composer's unsplit evaluation; only the arithmetic is in pieces, which assumes that a sample's output does not depend
// on the rest of its batch (true of models in eval mode: BatchNorm uses its running statistics). A model for which it
// does not hold sets the evaluator's device_eval_microbatch_size to the batch size. Not on accelerators, which want
// large batches, nor while automatic microbatching searches for the largest size that fits.
#pragma once

#include "composer/data/batch.h"
#include "composer/data/data_loader.h"
#include "composer/models/composer_model.h"

#include <ATen/ATen.h>

#include <vector>

namespace composer::detail {

inline constexpr int64_t kCpuEvalChunk = 256;

inline at::Tensor eval_forward_in_chunks(ComposerModel& model, const Batch& inputs) {
  if (inputs.num_samples() <= kCpuEvalChunk) return model.eval_forward(inputs);
  std::vector<at::Tensor> outputs;
  for (const Batch& piece : default_split_batch(inputs, static_cast<double>(kCpuEvalChunk))) {
    at::Tensor out = model.eval_forward(piece);
    // Not one output row per sample (a pooled or scalar output): the whole batch at once, as without pieces.
    if (!out.defined() || out.dim() == 0 || out.size(0) != piece.num_samples()) return model.eval_forward(inputs);
    outputs.push_back(std::move(out));
  }
  return at::cat(outputs);
}

}  // namespace composer::detail
