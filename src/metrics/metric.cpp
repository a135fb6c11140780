#include "composer/metrics/metric.h"

#include <ATen/ATen.h>

#include <limits>
#include <stdexcept>

namespace composer {

Metric::Metric(int64_t num_states, int64_t row_width) : num_states_(num_states), row_width_(row_width) { reset(); }

void Metric::reset() {
  state_ = at::zeros({num_states_}, at::TensorOptions().dtype(at::kDouble));
  rows_ = at::zeros({0, row_width_}, at::TensorOptions().dtype(at::kDouble));
}

void Metric::set_rows(const at::Tensor& rows) {
  if (rows.dim() != 2 || rows.size(1) != row_width_) {
    throw std::invalid_argument("Metric " + name() + ": rows must be [n, " + std::to_string(row_width_) +
                                "], got a tensor of " + std::to_string(rows.dim()) + " dimensions");
  }
  rows_ = rows.to(at::kDouble).clone();
}

void Metric::append_rows(const at::Tensor& rows) {
  const at::Tensor r = rows.to(at::kDouble).reshape({-1, row_width_});
  rows_ = at::cat({rows_.to(r.device()), r});
}

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
  if (state_.is_cpu() && first.numel() == 1) {  // one dispatched op instead of eight (a train metric, every step)
    double* s = state_.data_ptr<double>();
    s[0] += first.item<double>();
    s[1] += second;
    return;
  }
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
