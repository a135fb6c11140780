// Metric: a running statistic whose state is a vector of sums, so ranks combine it with one all-reduce (SUM), and,
// for a metric that keeps every prediction (torchmetrics' list states, reduced by 'cat'), rows that ranks combine
// by gathering them.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>

namespace composer {

class Metric {
 public:
  virtual ~Metric() = default;
  /// The key part of metrics/<label>/<name>.
  virtual std::string name() const = 0;
  /// Adds a batch. `preds` are model outputs (logits), `target` the labels.
  virtual void update(const at::Tensor& preds, const at::Tensor& target) = 0;
  /// The value from the accumulated state (NaN before any update).
  virtual double compute() const = 0;
  /// A fresh metric of the same kind and settings.
  virtual std::shared_ptr<Metric> clone_empty() const = 0;

  void reset();
  /// The summed state (float64, on the device of the last update). Adding two ranks' states combines them.
  const at::Tensor& state() const { return state_; }
  /// Replaces the state (after an all-reduce, or on checkpoint load). Requires the same number of entries.
  void set_state(const at::Tensor& state);

  /// Values per row of a list state; 0 for a metric that has none.
  int64_t row_width() const { return row_width_; }
  /// The list state: every row added so far, [rows, row_width] float64 (torchmetrics' 'cat' states). Adding two
  /// ranks' rows (concatenating them) combines them.
  const at::Tensor& rows() const { return rows_; }
  /// Replaces the rows (after a gather, or on checkpoint load). Requires [n, row_width].
  void set_rows(const at::Tensor& rows);

 protected:
  /// `num_states` summed entries, and a list state of `row_width` values per row when row_width > 0.
  explicit Metric(int64_t num_states, int64_t row_width = 0);
  /// Appends [n, row_width] rows to the list state (on the rows' device).
  void append_rows(const at::Tensor& rows);
  /// Adds `values` (a 1-D tensor of num_states entries) to the state, on the values' device.
  void accumulate(const at::Tensor& values);
  /// For two-entry states: adds a tensor to entry 0 and a number to entry 1, without building a new tensor.
  void accumulate(const at::Tensor& first, double second);
  /// The state as doubles on the CPU.
  std::vector<double> state_values() const;
  /// state[0] / state[1] (a mean over what was counted), NaN before any update.
  double mean_of_state() const;

 private:
  int64_t num_states_;
  int64_t row_width_;
  at::Tensor state_;
  at::Tensor rows_;
};

/// The name this library gives a metric that a Composer config names by its torchmetrics class:
/// "MulticlassAccuracy" -> "Accuracy" (an alias: our keys stay metrics/<label>/Accuracy). Other names are unchanged.
std::string canonical_metric_name(const std::string& name);

}  // namespace composer
