// An embedding's weight, read by name rather than through its type: an observer (ActivationMonitor) or a checkpoint
// wrapper may stand in for the Embedding, holding its parameters under the same names.
#pragma once

#include "composer/nn/layer.h"

#include <stdexcept>

namespace composer::models::detail {

inline at::Tensor embedding_weight(const nn::Layer& table) {
  const auto params = table.named_parameters(/*recurse=*/false);  // find() points into this dict: keep it alive
  if (const at::Tensor* w = params.find("weight")) return *w;
  throw std::logic_error("the embedding table has no weight");
}

}  // namespace composer::models::detail
