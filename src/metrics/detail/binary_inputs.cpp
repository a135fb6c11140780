#include "metrics/detail/binary_inputs.h"

#include <ATen/ATen.h>

#include <stdexcept>

namespace composer::detail {

std::pair<at::Tensor, at::Tensor> binary_inputs(const at::Tensor& preds, const at::Tensor& target,
                                                const std::string& metric) {
  if (preds.numel() != target.numel()) {
    throw std::invalid_argument(metric + ": predictions and targets differ in size (" + std::to_string(preds.numel()) +
                                " vs " + std::to_string(target.numel()) + ")");
  }
  const at::Tensor t = target.reshape({-1});
  if (t.numel() > 0 && !(t.eq(0) | t.eq(1)).all().item<bool>()) {
    throw std::invalid_argument(metric + ": targets must be 0 or 1 (a binary task), got values in [" +
                                std::to_string(t.min().item<double>()) + ", " + std::to_string(t.max().item<double>()) +
                                "]");
  }
  at::Tensor p = preds.reshape({-1});
  if (p.is_floating_point() && p.numel() > 0 && ((p < 0) | (p > 1)).any().item<bool>()) p = p.sigmoid();
  return {p, t};
}

at::Tensor binary_labels(const at::Tensor& probabilities, double threshold) {
  return probabilities.is_floating_point() ? (probabilities > threshold).to(at::kLong) : probabilities;
}

}  // namespace composer::detail
