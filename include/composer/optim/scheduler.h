// Composer's learning-rate schedulers: functions of the State's Timestamp returning an LR multiplier.
#pragma once

#include "composer/core/time.h"

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
};

/// Composer's _convert_time: `dur` -> int(frac * max_duration) in max_duration's unit (epochs become batches
/// through dataloader_len), no ssr; `ep` -> batches via dataloader_len, then * ssr; others int(value * ssr).
/// Throws std::invalid_argument when max_duration (or dataloader_len for epochs) is unset.
Time convert_time(const Time& time, const State& state, double ssr = 1.0);

/// gamma ^ floor(t / step_size).
class StepScheduler : public ComposerScheduler {
 public:
  StepScheduler(Time step_size, double gamma = 0.1);
  double operator()(const State& state, double ssr = 1.0) const override;

 private:
  Time step_size_;
  double gamma_;
};

/// gamma ^ (number of milestones <= t).
class MultiStepScheduler : public ComposerScheduler {
 public:
  MultiStepScheduler(std::vector<Time> milestones, double gamma = 0.1);
  double operator()(const State& state, double ssr = 1.0) const override;

 private:
  std::vector<Time> milestones_;
  double gamma_;
};

/// alpha before t_max, then 1.
class ConstantScheduler : public ComposerScheduler {
 public:
  explicit ConstantScheduler(double alpha = 1.0, Time t_max = Time::from_duration(1.0));
  double operator()(const State& state, double ssr = 1.0) const override;

 private:
  double alpha_;
  Time t_max_;
};

/// alpha_i + min(1, t / t_max) * (alpha_f - alpha_i).
class LinearScheduler : public ComposerScheduler {
 public:
  explicit LinearScheduler(double alpha_i = 1.0, double alpha_f = 0.0, Time t_max = Time::from_duration(1.0));
  double operator()(const State& state, double ssr = 1.0) const override;

 private:
  double alpha_i_, alpha_f_;
  Time t_max_;
};

/// gamma ^ (t / decay_period).
class ExponentialScheduler : public ComposerScheduler {
 public:
  explicit ExponentialScheduler(double gamma, Time decay_period = Time::from_epoch(1));
  double operator()(const State& state, double ssr = 1.0) const override;

 private:
  double gamma_;
  Time decay_period_;
};

/// alpha_f + (1 - alpha_f) * (1 + cos(pi * clip(t / t_max, 0, 1))) / 2.
class CosineAnnealingScheduler : public ComposerScheduler {
 public:
  explicit CosineAnnealingScheduler(Time t_max = Time::from_duration(1.0), double alpha_f = 0.0);
  double operator()(const State& state, double ssr = 1.0) const override;

 private:
  Time t_max_;
  double alpha_f_;
};

/// Cosine annealing within intervals of length t_0, int(t_mult * t_0), ...
class CosineAnnealingWarmRestartsScheduler : public ComposerScheduler {
 public:
  CosineAnnealingWarmRestartsScheduler(Time t_0, double t_mult = 1.0, double alpha_f = 0.0);
  double operator()(const State& state, double ssr = 1.0) const override;

 private:
  Time t_0_;
  double t_mult_, alpha_f_;
};

/// alpha_f + (1 - min(1, t / t_max))^power * (1 - alpha_f).
class PolynomialScheduler : public ComposerScheduler {
 public:
  explicit PolynomialScheduler(double power, Time t_max = Time::from_duration(1.0), double alpha_f = 0.0);
  double operator()(const State& state, double ssr = 1.0) const override;

 private:
  double power_;
  Time t_max_;
  double alpha_f_;
};

/// Linear ramp 0 -> alpha_i over t_warmup, then linear alpha_i -> alpha_f with frac = min(1, (t - t_warmup) /
/// (t_max - t_warmup)) (0 if t_max <= t_warmup). As in Composer, for every *WithWarmup scheduler: t_warmup is never
/// scaled by the scale schedule ratio; scale_warmup only shortens the ramp (which then holds its end value until
/// t_warmup), while t_max is scaled. t_warmup and t_max must share a unit after conversion, a t_max shorter than
/// max_duration throws std::invalid_argument, and a t_warmup that converts to 0 warns once per class.
class LinearWithWarmupScheduler : public ComposerScheduler {
 public:
  LinearWithWarmupScheduler(Time t_warmup, double alpha_i = 1.0, double alpha_f = 0.0,
                            Time t_max = Time::from_duration(1.0), bool scale_warmup = false);
  double operator()(const State& state, double ssr = 1.0) const override;

 private:
  Time t_warmup_;
  double alpha_i_, alpha_f_;
  Time t_max_;
  bool scale_warmup_;
};

/// LinearWithWarmup with alpha_i = alpha_f = alpha.
class ConstantWithWarmupScheduler : public ComposerScheduler {
 public:
  ConstantWithWarmupScheduler(Time t_warmup, double alpha = 1.0, Time t_max = Time::from_duration(1.0),
                              bool scale_warmup = false);
  double operator()(const State& state, double ssr = 1.0) const override;

 private:
  LinearWithWarmupScheduler inner_;
};

/// Warmup ramp 0 -> 1, then cosine annealing to alpha_f over the rest of t_max.
class CosineAnnealingWithWarmupScheduler : public ComposerScheduler {
 public:
  CosineAnnealingWithWarmupScheduler(Time t_warmup, Time t_max = Time::from_duration(1.0), double alpha_f = 0.0,
                                     bool scale_warmup = false);
  double operator()(const State& state, double ssr = 1.0) const override;

 private:
  Time t_warmup_, t_max_;
  double alpha_f_;
  bool scale_warmup_;
};

/// Warmup ramp 0 -> 1, then polynomial decay to alpha_f.
class PolynomialWithWarmupScheduler : public ComposerScheduler {
 public:
  PolynomialWithWarmupScheduler(Time t_warmup, double power = 2.0, Time t_max = Time::from_duration(1.0),
                                double alpha_f = 0.0, bool scale_warmup = false);
  double operator()(const State& state, double ssr = 1.0) const override;

 private:
  Time t_warmup_;
  double power_;
  Time t_max_;
  double alpha_f_;
  bool scale_warmup_;
};

/// Warmup ramp 0 -> 1, then MultiStep on absolute milestones.
class MultiStepWithWarmupScheduler : public ComposerScheduler {
 public:
  MultiStepWithWarmupScheduler(Time t_warmup, std::vector<Time> milestones, double gamma = 0.1,
                               bool scale_warmup = false);
  double operator()(const State& state, double ssr = 1.0) const override;

 private:
  Time t_warmup_;
  MultiStepScheduler steps_;
  bool scale_warmup_;
};

/// Sets each parameter group's lr to base_lrs[i] * product of the schedulers' multipliers.
/// Requires state.optimizer and base_lrs.size() == number of groups.
void apply_schedulers(State& state, const std::vector<double>& base_lrs, double ssr);

}  // namespace composer
