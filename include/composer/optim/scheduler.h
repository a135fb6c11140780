// Composer's learning-rate schedulers: functions of the State's Timestamp returning an LR multiplier. Each built-in
// scheduler takes its options struct (optim/scheduler_options.h); those with one required argument can also be built
// from it alone, e.g. CosineAnnealingWithWarmupScheduler(Time::from_string("100ba")).
#pragma once

#include "composer/core/time.h"
#include "composer/optim/scheduler_options.h"

#include <memory>
#include <string>
#include <vector>

namespace composer {

struct State;

/// f(state, ssr) -> multiplier of each parameter group's initial lr. `ssr` is the scale_schedule_ratio.
class ComposerScheduler {
 public:
  virtual ~ComposerScheduler() = default;
  virtual double operator()(const State& state, double ssr = 1.0) const = 0;
  virtual std::string name() const;
  /// "Name(field=value, ...)" for the built-in schedulers (re-created by optim::scheduler_registry()); name() + "()"
  /// otherwise.
  virtual std::string repr() const { return name() + "()"; }
};

/// Composer's _convert_time: `dur` -> int(frac * max_duration) in max_duration's unit (epochs become batches
/// through dataloader_len), no ssr; `ep` -> batches via dataloader_len, then * ssr; others int(value * ssr).
/// Throws std::invalid_argument when max_duration (or dataloader_len for epochs) is unset.
Time convert_time(const Time& time, const State& state, double ssr = 1.0);

/// gamma ^ floor(t / step_size).
class StepScheduler : public ComposerScheduler {
 public:
  /// Throws std::invalid_argument when a required field (step_size) is unset.
  explicit StepScheduler(StepSchedulerOptions options);
  explicit StepScheduler(Time step_size);
  double operator()(const State& state, double ssr = 1.0) const override;
  std::string repr() const override;
  const StepSchedulerOptions& options() const { return options_; }

 private:
  StepSchedulerOptions options_;
};

/// gamma ^ (number of milestones <= t).
class MultiStepScheduler : public ComposerScheduler {
 public:
  /// Throws std::invalid_argument when a required field (milestones) is unset.
  explicit MultiStepScheduler(MultiStepSchedulerOptions options);
  explicit MultiStepScheduler(std::vector<Time> milestones);
  double operator()(const State& state, double ssr = 1.0) const override;
  std::string repr() const override;
  const MultiStepSchedulerOptions& options() const { return options_; }

 private:
  MultiStepSchedulerOptions options_;
};

/// alpha before t_max, then 1.
class ConstantScheduler : public ComposerScheduler {
 public:
  explicit ConstantScheduler(ConstantSchedulerOptions options = {});
  double operator()(const State& state, double ssr = 1.0) const override;
  std::string repr() const override;
  const ConstantSchedulerOptions& options() const { return options_; }

 private:
  ConstantSchedulerOptions options_;
};

/// alpha_i + min(1, t / t_max) * (alpha_f - alpha_i).
class LinearScheduler : public ComposerScheduler {
 public:
  explicit LinearScheduler(LinearSchedulerOptions options = {});
  double operator()(const State& state, double ssr = 1.0) const override;
  std::string repr() const override;
  const LinearSchedulerOptions& options() const { return options_; }

 private:
  LinearSchedulerOptions options_;
};

/// gamma ^ (t / decay_period).
class ExponentialScheduler : public ComposerScheduler {
 public:
  /// Throws std::invalid_argument when a required field (gamma) is unset.
  explicit ExponentialScheduler(ExponentialSchedulerOptions options);
  explicit ExponentialScheduler(double gamma);
  double operator()(const State& state, double ssr = 1.0) const override;
  std::string repr() const override;
  const ExponentialSchedulerOptions& options() const { return options_; }

 private:
  ExponentialSchedulerOptions options_;
};

/// alpha_f + (1 - alpha_f) * (1 + cos(pi * clip(t / t_max, 0, 1))) / 2.
class CosineAnnealingScheduler : public ComposerScheduler {
 public:
  explicit CosineAnnealingScheduler(CosineAnnealingSchedulerOptions options = {});
  double operator()(const State& state, double ssr = 1.0) const override;
  std::string repr() const override;
  const CosineAnnealingSchedulerOptions& options() const { return options_; }

 private:
  CosineAnnealingSchedulerOptions options_;
};

/// Cosine annealing within intervals of length t_0, int(t_mult * t_0), ...
class CosineAnnealingWarmRestartsScheduler : public ComposerScheduler {
 public:
  /// Throws std::invalid_argument when a required field (t_0) is unset.
  explicit CosineAnnealingWarmRestartsScheduler(CosineAnnealingWarmRestartsSchedulerOptions options);
  explicit CosineAnnealingWarmRestartsScheduler(Time t_0);
  double operator()(const State& state, double ssr = 1.0) const override;
  std::string repr() const override;
  const CosineAnnealingWarmRestartsSchedulerOptions& options() const { return options_; }

 private:
  CosineAnnealingWarmRestartsSchedulerOptions options_;
};

/// alpha_f + (1 - min(1, t / t_max))^power * (1 - alpha_f).
class PolynomialScheduler : public ComposerScheduler {
 public:
  /// Throws std::invalid_argument when a required field (power) is unset.
  explicit PolynomialScheduler(PolynomialSchedulerOptions options);
  explicit PolynomialScheduler(double power);
  double operator()(const State& state, double ssr = 1.0) const override;
  std::string repr() const override;
  const PolynomialSchedulerOptions& options() const { return options_; }

 private:
  PolynomialSchedulerOptions options_;
};

/// Linear ramp 0 -> alpha_i over t_warmup, then linear alpha_i -> alpha_f with frac = min(1, (t - t_warmup) /
/// (t_max - t_warmup)) (0 if t_max <= t_warmup). As in Composer, for every *WithWarmup scheduler: t_warmup is never
/// scaled by the scale schedule ratio; scale_warmup only shortens the ramp (which then holds its end value until
/// t_warmup), while t_max is scaled. t_warmup and t_max must share a unit after conversion, a t_max shorter than
/// max_duration throws std::invalid_argument, and a t_warmup that converts to 0 warns once per class.
class LinearWithWarmupScheduler : public ComposerScheduler {
 public:
  /// Throws std::invalid_argument when a required field (t_warmup) is unset.
  explicit LinearWithWarmupScheduler(LinearWithWarmupSchedulerOptions options);
  explicit LinearWithWarmupScheduler(Time t_warmup);
  double operator()(const State& state, double ssr = 1.0) const override;
  std::string repr() const override;
  const LinearWithWarmupSchedulerOptions& options() const { return options_; }

 private:
  LinearWithWarmupSchedulerOptions options_;
};

/// LinearWithWarmup with alpha_i = alpha_f = alpha.
class ConstantWithWarmupScheduler : public ComposerScheduler {
 public:
  /// Throws std::invalid_argument when a required field (t_warmup) is unset.
  explicit ConstantWithWarmupScheduler(ConstantWithWarmupSchedulerOptions options);
  explicit ConstantWithWarmupScheduler(Time t_warmup);
  double operator()(const State& state, double ssr = 1.0) const override;
  std::string repr() const override;
  const ConstantWithWarmupSchedulerOptions& options() const { return options_; }

 private:
  ConstantWithWarmupSchedulerOptions options_;
};

/// Warmup ramp 0 -> 1, then cosine annealing to alpha_f over the rest of t_max.
class CosineAnnealingWithWarmupScheduler : public ComposerScheduler {
 public:
  /// Throws std::invalid_argument when a required field (t_warmup) is unset.
  explicit CosineAnnealingWithWarmupScheduler(CosineAnnealingWithWarmupSchedulerOptions options);
  explicit CosineAnnealingWithWarmupScheduler(Time t_warmup);
  double operator()(const State& state, double ssr = 1.0) const override;
  std::string repr() const override;
  const CosineAnnealingWithWarmupSchedulerOptions& options() const { return options_; }

 private:
  CosineAnnealingWithWarmupSchedulerOptions options_;
};

/// Warmup ramp 0 -> 1, then polynomial decay to alpha_f.
class PolynomialWithWarmupScheduler : public ComposerScheduler {
 public:
  /// Throws std::invalid_argument when a required field (t_warmup) is unset.
  explicit PolynomialWithWarmupScheduler(PolynomialWithWarmupSchedulerOptions options);
  explicit PolynomialWithWarmupScheduler(Time t_warmup);
  double operator()(const State& state, double ssr = 1.0) const override;
  std::string repr() const override;
  const PolynomialWithWarmupSchedulerOptions& options() const { return options_; }

 private:
  PolynomialWithWarmupSchedulerOptions options_;
};

/// Warmup ramp 0 -> 1, then MultiStep on absolute milestones.
class MultiStepWithWarmupScheduler : public ComposerScheduler {
 public:
  /// Throws std::invalid_argument when a required field (t_warmup, milestones) is unset.
  explicit MultiStepWithWarmupScheduler(MultiStepWithWarmupSchedulerOptions options);
  double operator()(const State& state, double ssr = 1.0) const override;
  std::string repr() const override;
  const MultiStepWithWarmupSchedulerOptions& options() const { return options_; }

 private:
  MultiStepWithWarmupSchedulerOptions options_;
};

/// Sets each parameter group's lr to base_lrs[i] * product of the schedulers' multipliers.
/// Requires state.optimizer and base_lrs.size() == number of groups.
void apply_schedulers(State& state, const std::vector<double>& base_lrs, double ssr);

}  // namespace composer
