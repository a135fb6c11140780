// The options of Composer's schedulers, one struct per scheduler, each with its field list (core/fields.h): the
// fields, their order and their defaults are Composer's constructor arguments. A Required field is a required
// argument (the scheduler throws std::invalid_argument naming it while it is unset).
#pragma once

#include "composer/core/fields.h"
#include "composer/core/time.h"

#include <torch/arg.h>

#include <optional>
#include <vector>

namespace composer {

/// StepScheduler: gamma ^ floor(t / step_size).
struct StepSchedulerOptions {
  TORCH_ARG(Required<Time>, step_size);
  TORCH_ARG(double, gamma) = 0.1;

 public:
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("step_size", self.step_size_, "required: the time between decays");
    visit("gamma", self.gamma_, "multiplier per step");
  }
};

/// MultiStepScheduler: gamma ^ (milestones passed).
struct MultiStepSchedulerOptions {
  TORCH_ARG(Required<std::vector<Time>>, milestones);
  TORCH_ARG(double, gamma) = 0.1;

 public:
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("milestones", self.milestones_, "required: the times at which to decay");
    visit("gamma", self.gamma_, "multiplier per milestone");
  }
};

/// ConstantScheduler: alpha before t_max, then 1.
struct ConstantSchedulerOptions {
  TORCH_ARG(double, alpha) = 1.0;
  TORCH_ARG(Time, t_max) = Time::from_duration(1.0);

 public:
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("alpha", self.alpha_, "multiplier before t_max");
    visit("t_max", self.t_max_, "time at which the multiplier becomes 1");
  }
};

/// LinearScheduler: alpha_i -> alpha_f linearly over t_max.
struct LinearSchedulerOptions {
  TORCH_ARG(double, alpha_i) = 1.0;
  TORCH_ARG(double, alpha_f) = 0.0;
  TORCH_ARG(Time, t_max) = Time::from_duration(1.0);

 public:
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("alpha_i", self.alpha_i_, "initial multiplier");
    visit("alpha_f", self.alpha_f_, "final multiplier");
    visit("t_max", self.t_max_, "time at which alpha_f is reached");
  }
};

/// ExponentialScheduler: gamma ^ (t / decay_period).
struct ExponentialSchedulerOptions {
  TORCH_ARG(Required<double>, gamma);
  TORCH_ARG(Time, decay_period) = Time::from_epoch(1);

 public:
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("gamma", self.gamma_, "required: multiplier per decay period");
    visit("decay_period", self.decay_period_, "the time of one decay by gamma");
  }
};

/// CosineAnnealingScheduler: cosine from 1 to alpha_f over t_max.
struct CosineAnnealingSchedulerOptions {
  TORCH_ARG(Time, t_max) = Time::from_duration(1.0);
  TORCH_ARG(double, alpha_f) = 0.0;

 public:
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("t_max", self.t_max_, "time at which alpha_f is reached");
    visit("alpha_f", self.alpha_f_, "final multiplier");
  }
};

/// CosineAnnealingWarmRestartsScheduler: cosine restarting every t_0 (times t_mult).
struct CosineAnnealingWarmRestartsSchedulerOptions {
  TORCH_ARG(Required<Time>, t_0);
  TORCH_ARG(double, t_mult) = 1.0;
  TORCH_ARG(double, alpha_f) = 0.0;

 public:
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("t_0", self.t_0_, "required: the first interval between restarts");
    visit("t_mult", self.t_mult_, "growth of each interval over the previous one");
    visit("alpha_f", self.alpha_f_, "multiplier at the end of each interval");
  }
};

/// PolynomialScheduler: alpha_f + (1 - t/t_max)^power (1 - alpha_f).
struct PolynomialSchedulerOptions {
  TORCH_ARG(Required<double>, power);
  TORCH_ARG(Time, t_max) = Time::from_duration(1.0);
  TORCH_ARG(double, alpha_f) = 0.0;

 public:
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("power", self.power_, "required: the exponent of the decay");
    visit("t_max", self.t_max_, "time at which alpha_f is reached");
    visit("alpha_f", self.alpha_f_, "final multiplier");
  }
};

/// MultiStepWithWarmupScheduler: warmup, then multistep on absolute milestones.
struct MultiStepWithWarmupSchedulerOptions {
  TORCH_ARG(Required<Time>, t_warmup);
  TORCH_ARG(Required<std::vector<Time>>, milestones);
  TORCH_ARG(double, gamma) = 0.1;
  TORCH_ARG(bool, scale_warmup) = false;

 public:
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("t_warmup", self.t_warmup_, "required: the warmup duration");
    visit("milestones", self.milestones_, "required: the times at which to decay");
    visit("gamma", self.gamma_, "multiplier per milestone");
    visit("scale_warmup", self.scale_warmup_, "stretch the warmup ramp by the scale schedule ratio");
  }
};

/// ConstantWithWarmupScheduler: linear warmup over t_warmup, then alpha.
struct ConstantWithWarmupSchedulerOptions {
  TORCH_ARG(Required<Time>, t_warmup);
  TORCH_ARG(double, alpha) = 1.0;
  TORCH_ARG(Time, t_max) = Time::from_duration(1.0);
  TORCH_ARG(bool, scale_warmup) = false;

 public:
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("t_warmup", self.t_warmup_, "required: the warmup duration");
    visit("alpha", self.alpha_, "multiplier after the warmup");
    visit("t_max", self.t_max_, "time at which the schedule ends");
    visit("scale_warmup", self.scale_warmup_, "stretch the warmup ramp by the scale schedule ratio");
  }
};

/// LinearWithWarmupScheduler: warmup, then alpha_i -> alpha_f linearly.
struct LinearWithWarmupSchedulerOptions {
  TORCH_ARG(Required<Time>, t_warmup);
  TORCH_ARG(double, alpha_i) = 1.0;
  TORCH_ARG(double, alpha_f) = 0.0;
  TORCH_ARG(Time, t_max) = Time::from_duration(1.0);
  TORCH_ARG(bool, scale_warmup) = false;

 public:
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("t_warmup", self.t_warmup_, "required: the warmup duration");
    visit("alpha_i", self.alpha_i_, "multiplier at the end of the warmup");
    visit("alpha_f", self.alpha_f_, "final multiplier");
    visit("t_max", self.t_max_, "time at which alpha_f is reached");
    visit("scale_warmup", self.scale_warmup_, "stretch the warmup ramp by the scale schedule ratio");
  }
};

/// CosineAnnealingWithWarmupScheduler: warmup, then cosine to alpha_f.
struct CosineAnnealingWithWarmupSchedulerOptions {
  TORCH_ARG(Required<Time>, t_warmup);
  TORCH_ARG(Time, t_max) = Time::from_duration(1.0);
  TORCH_ARG(double, alpha_f) = 0.0;
  TORCH_ARG(bool, scale_warmup) = false;

 public:
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("t_warmup", self.t_warmup_, "required: the warmup duration");
    visit("t_max", self.t_max_, "time at which alpha_f is reached");
    visit("alpha_f", self.alpha_f_, "final multiplier");
    visit("scale_warmup", self.scale_warmup_, "stretch the warmup ramp by the scale schedule ratio");
  }
};

/// PolynomialWithWarmupScheduler: warmup, then polynomial decay.
struct PolynomialWithWarmupSchedulerOptions {
  TORCH_ARG(Required<Time>, t_warmup);
  TORCH_ARG(double, power) = 2.0;
  TORCH_ARG(Time, t_max) = Time::from_duration(1.0);
  TORCH_ARG(double, alpha_f) = 0.0;
  TORCH_ARG(bool, scale_warmup) = false;

 public:
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("t_warmup", self.t_warmup_, "required: the warmup duration");
    visit("power", self.power_, "the exponent of the decay");
    visit("t_max", self.t_max_, "time at which alpha_f is reached");
    visit("alpha_f", self.alpha_f_, "final multiplier");
    visit("scale_warmup", self.scale_warmup_, "stretch the warmup ramp by the scale schedule ratio");
  }
};

}  // namespace composer
