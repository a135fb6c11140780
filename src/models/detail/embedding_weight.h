// An embedding's weight, read by name rather than through its type: an observer (ActivationMonitor) or a checkpoint
// wrapper may stand in for the Embedding, holding its parameters under the same names.
#pragma once

#include "composer/nn/layer.h"
#include "composer/nn/tensor_parallel_plan.h"
#include "models/detail/seen_through.h"

#include <ATen/ATen.h>

#include <stdexcept>

namespace composer::models::detail {

inline at::Tensor embedding_weight(const nn::Layer& table) {
  const auto params = table.named_parameters(/*recurse=*/false);  // find() points into this dict: keep it alive
  if (const at::Tensor* w = params.find("weight")) return *w;
  throw std::logic_error("the embedding table has no weight");
}

// A head tied to `table`: hidden @ weight^T (+ bias), through the table (or the one it stands in for) when tensor
// parallelism split its vocabulary, so that the logits cover the whole vocabulary.
inline at::Tensor tied_logits(const nn::Layer& table, const at::Tensor& hidden, const at::Tensor& bias = {}) {
  if (auto* split = seen_through<nn::VocabularyParallel>(table)) {
    const at::Tensor logits = split->tied_logits(hidden);
    return bias.defined() ? logits + bias : logits;
  }
  return at::linear(hidden, embedding_weight(table), bias);
}

}  // namespace composer::models::detail
