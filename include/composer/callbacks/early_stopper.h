// EarlyStopper: ends training when a metric has not improved for `patience` (Composer's EarlyStopper).
#pragma once

#include "composer/core/callback.h"
#include "composer/core/fields.h"
#include "composer/core/time.h"

#include <torch/arg.h>

#include <functional>
#include <optional>
#include <string>

namespace composer {

/// Watches `monitor` of the evaluator labelled `dataloader_label` at EVAL_END, or of the train metrics ("train") at
/// EPOCH_END (and BATCH_END when patience is in batches). A value is an improvement when comp(value, best) holds and
/// it differs from the best by more than |min_delta|; training stops once the epochs (or batches) since the last
/// improvement exceed `patience`.
struct EarlyStopperOptions {
  using Compare = std::function<bool(double value, double best)>;
  TORCH_ARG(Required<std::string>, monitor);
  TORCH_ARG(Required<std::string>, dataloader_label);
  /// "greater"/"gt" or "less"/"lt"; empty: "less" when the name contains loss, error or perplexity, else "greater".
  TORCH_ARG(std::string, comp) = "";
  /// Not a field (a function): when set it replaces `comp`.
  TORCH_ARG(Compare, comp_fn) = nullptr;
  TORCH_ARG(double, min_delta) = 0.0;
  /// Epochs or batches; a bare integer is epochs.
  TORCH_ARG(Time, patience) = Time::from_epoch(1);

 public:
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("monitor", self.monitor_, "required: the metric to watch, such as 'MulticlassAccuracy'");
    visit("dataloader_label", self.dataloader_label_, "required: the evaluator label, or 'train'");
    visit("comp", self.comp_, "'greater', 'gt', 'less' or 'lt'; empty picks by the metric's name");
    visit("min_delta", self.min_delta_, "the least change that counts as an improvement");
    visit("patience", ensure_time(TimeUnit::EPOCH, self.patience_), "epochs or batches without improvement");
  }
};

class EarlyStopper : public Callback {
 public:
  /// Throws std::invalid_argument naming an unset monitor or dataloader_label, an unknown comp, or a patience that
  /// is not in epochs or batches.
  explicit EarlyStopper(EarlyStopperOptions options);
  void eval_end(State& state, Logger& logger) override;
  void epoch_end(State& state, Logger& logger) override;
  void batch_end(State& state, Logger& logger) override;
  /// The best value so far; unset before the first check.
  std::optional<double> best() const { return best_; }

 private:
  void update(State& state, const std::map<std::string, double>& values);
  std::string monitor_, label_;
  EarlyStopperOptions::Compare comp_;
  double min_delta_;
  Time patience_;
  std::optional<double> best_;
  Timestamp best_occurred_;
};

}  // namespace composer
