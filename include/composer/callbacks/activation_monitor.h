// ActivationMonitor: statistics of every layer's input and output activations at an interval (Composer's
// ActivationMonitor).
#pragma once

#include "composer/core/callback.h"
#include "composer/core/fields.h"
#include "composer/core/time.h"

#include <torch/arg.h>

#include <memory>
#include <string>
#include <vector>

namespace composer {

struct ActivationMonitorOptions {
  /// How often to record (a bare integer counts batches; units ba or ep).
  TORCH_ARG(Time, interval) = Time::from_batch(25);
  /// Layers whose name contains any of these strings are left out (Composer's ignore_module_types).
  TORCH_ARG(std::vector<std::string>, ignore_module_types) = {};
  /// Composer sends the metrics only to Weights & Biases when one is present; we have none, so, as Composer does
  /// without one, they go to every destination. Accepted for configs written for Composer.
  TORCH_ARG(bool, only_log_wandb) = true;

 public:
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("interval", ensure_time(TimeUnit::BATCH, self.interval_), "how often to record the activations");
    visit("ignore_module_types", self.ignore_module_types_, "leave out layers whose name contains one of these");
    visit("only_log_wandb", self.only_log_wandb_, "(no W&B here: every destination gets the metrics)");
  }
};

/// At the first microbatch's forward whenever the count in the interval's unit is a multiple of it (once per count),
/// every layer below the model's nn::Composite layers is observed for that forward: its input (`_input.0`) and each
/// row of its output (`_output.<i>`, one key per sample, since Composer enumerates an output tensor along its first
/// dimension) give, over the last dimension and then averaged, activations/l2_norm/<layer>, activations/average/
/// <layer>, activations/kurtosis/<layer> and activations/max/<layer> (layer names as the model's named_modules(),
/// such as "module.h.0.attn"). Integer and boolean tensors (token ids) are skipped. Logged at the batch's step.
/// Observation is surgery: each child is swapped for an observer for that one forward and put back at AFTER_FORWARD
/// (or at FIT_END after an error), so nothing is left behind. Layers called outside composer::nn::Composite (torch::nn
/// modules have no forward hooks in C++) cannot be observed: a model with no Composite at all is an error.
class ActivationMonitor : public Callback {
 public:
  /// Throws std::invalid_argument for an interval not in ba or ep or below 1.
  explicit ActivationMonitor(ActivationMonitorOptions options = {});
  ~ActivationMonitor() override;
  void before_forward(State& state, Logger& logger) override;
  void after_forward(State& state, Logger& logger) override;
  void fit_end(State& state, Logger& logger) override;

  struct Observers;

 private:
  bool due(const State& state) const;
  ActivationMonitorOptions options_;
  int64_t last_logged_ = -1;
  std::unique_ptr<Observers> observers_;
};

}  // namespace composer
