// torchmetrics' binary input rules, shared by the binary metrics: the same number of predictions and targets,
// targets 0 or 1, floating predictions outside [0, 1] taken as logits (sigmoid).
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <utility>

namespace composer::detail {

/// {probabilities or integer labels, flattened; targets, flattened}. Throws std::invalid_argument naming `metric`.
std::pair<at::Tensor, at::Tensor> binary_inputs(const at::Tensor& preds, const at::Tensor& target,
                                                const std::string& metric);
/// The predictions as 0/1 labels: probabilities above `threshold` are 1; integer predictions are labels already.
at::Tensor binary_labels(const at::Tensor& probabilities, double threshold);

}  // namespace composer::detail
