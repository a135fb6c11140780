#include "composer/metrics/metric.h"

#include <ATen/ATen.h>

#include <limits>
#include <stdexcept>

namespace composer {

Metric::Metric(int64_t num_states) : num_states_(num_states) { reset(); }

void Metric::reset() { state_ = at::zeros({num_states_}, at::TensorOptions().dtype(at::kDouble)); }

void Metric::set_state(const at::Tensor& state) {
  if (state.dim() != 1 || state.size(0) != num_states_) {
    throw std::invalid_argument("Metric " + name() + ": state must have " + std::to_string(num_states_) +
                                " entries, got shape " + std::to_string(state.numel()));
  }
  state_ = state.to(at::kDouble).clone();
}

void Metric::accumulate(const at::Tensor& values) {
  const at::Tensor v = values.to(at::kDouble);
  if (state_.device() != v.device()) state_ = state_.to(v.device());
  state_.add_(v);
}

void Metric::accumulate(const at::Tensor& first, double second) {
  if (state_.device() != first.device()) state_ = state_.to(first.device());
  state_.select(0, 0).add_(first);
  state_.select(0, 1).add_(second);
}

double Metric::mean_of_state() const {
  const auto s = state_values();
  return s[1] > 0 ? s[0] / s[1] : std::numeric_limits<double>::quiet_NaN();
}

std::vector<double> Metric::state_values() const {
  const at::Tensor cpu = state_.to(at::kCPU).contiguous();
  return std::vector<double>(cpu.data_ptr<double>(), cpu.data_ptr<double>() + num_states_);
}

std::string canonical_metric_name(const std::string& name) { return name == "MulticlassAccuracy" ? "Accuracy" : name; }

}  // namespace composer
