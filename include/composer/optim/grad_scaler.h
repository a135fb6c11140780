// GradScaler: dynamic loss scaling for amp_fp16 (torch.amp.GradScaler's semantics).
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <torch/arg.h>

namespace torch::optim {
class Optimizer;
}

namespace composer {

struct GradScalerOptions {
  TORCH_ARG(double, init_scale) = 65536.0;
  TORCH_ARG(double, growth_factor) = 2.0;
  TORCH_ARG(double, backoff_factor) = 0.5;
  /// Consecutive finite steps before the scale grows.
  TORCH_ARG(int64_t, growth_interval) = 2000;
  TORCH_ARG(bool, enabled) = true;

 public:
  void validate() const;

 public:
  /// The keys a config sets (repr, hyperparameter logging, read_options).
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("init_scale", self.init_scale_, "the first loss scale");
    visit("growth_factor", self.growth_factor_, "scale multiplier after growth_interval finite steps");
    visit("backoff_factor", self.backoff_factor_, "scale multiplier after a step with inf or NaN gradients");
    visit("growth_interval", self.growth_interval_, "consecutive finite steps before the scale grows");
    visit("enabled", self.enabled_, "false: scale by 1, never skip");
  }
};

/// Contract per step: scale(loss).backward(); optionally unscale_(opt); step(opt) skips the optimizer step when any
/// gradient is inf/NaN; update() then backs the scale off (inf seen) or grows it after growth_interval clean steps.
/// Uses the fused `_amp_` kernels where the device has them and plain tensor ops elsewhere.
class GradScaler {
 public:
  explicit GradScaler(GradScalerOptions options = GradScalerOptions());

  /// loss * scale (unchanged when disabled).
  at::Tensor scale(const at::Tensor& loss);
  /// Divides the gradients by the scale in place and records whether any is inf/NaN. Once per step.
  void unscale_(torch::optim::Optimizer& optimizer);
  /// Unscales if needed, then steps unless an inf/NaN gradient was found. Returns true if it stepped.
  bool step(torch::optim::Optimizer& optimizer);
  /// Adjusts the scale for the next step and clears this step's record.
  void update();

  double get_scale() const;
  bool is_enabled() const { return options_.enabled(); }
  /// Whether the last unscale_ found an inf/NaN gradient.
  bool found_inf() const;
  /// Forget the current step's unscale record (auto microbatching retries a batch).
  void reset_step();

  /// {"scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker"} as in torch.
  c10::IValue state_dict() const;
  void load_state_dict(const c10::IValue& state);

 private:
  void lazy_init(const at::Device& device);
  GradScalerOptions options_;
  at::Tensor scale_;           // float32 [1]
  at::Tensor growth_tracker_;  // int32 [1]
  at::Tensor found_inf_;       // float32 [1], this step
  bool unscaled_ = false;
};

}  // namespace composer
