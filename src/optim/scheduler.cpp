#include "composer/optim/scheduler.h"

#include "composer/core/state.h"
#include "composer/utils/type_name.h"

#include <torch/optim/optimizer.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <mutex>
#include <set>
#include <stdexcept>

namespace composer {
namespace {

constexpr double kPi = 3.14159265358979323846;

// Composer's _cosine_anneal: x clipped to [0, 1].
double cosine_anneal(double x, double min_y) {
  x = std::clamp(x, 0.0, 1.0);
  return min_y + (1.0 - min_y) * (1.0 + std::cos(x * kPi)) / 2.0;
}

// (now / of) as a plain number, in `of`'s unit.
double ratio(const State& state, const Time& of) { return (state.timestamp.get(of.unit()) / of).value(); }

// Composer's warmup schedulers: t_warmup is converted without the scale schedule ratio (scale_warmup only stretches
// the ramp, which then holds its end value until t_warmup), t_max with it. Both must share a unit, t_max must cover
// max_duration, and a zero-length warmup warns (once per scheduler class).
struct WarmupSpan {
  Time warmup, max;
};

void require_t_max_covers_max_duration(const Time& t_max, const State& state, const std::string& who) {
  const Time& max = *state.max_duration;
  bool short_t_max = false;
  if (t_max.unit() == max.unit()) {
    short_t_max = t_max.value() < max.value();
  } else if (t_max.unit() == TimeUnit::BATCH && max.unit() == TimeUnit::EPOCH && state.dataloader_len) {
    short_t_max = t_max.value() < max.value() * static_cast<double>(*state.dataloader_len);
  }
  if (short_t_max) {
    throw std::invalid_argument(who + ": t_max " + t_max.to_string() +
                                " must be greater than or equal to max_duration " + max.to_string() +
                                ", otherwise the schedule is not defined for the whole run");
  }
}

void warn_zero_warmup(const Time& t_warmup, const std::string& who) {
  static std::set<std::string> warned;
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  if (t_warmup.value() != 0 || !warned.insert(who).second) return;
  std::cerr << "composer: warning: " << who << ": the warmup duration is 0. A t_warmup in 'dur' is converted in the "
            << "unit of max_duration, so a small fraction of a few epochs rounds down to 0.\n";
}

WarmupSpan warmup_span(const State& state, const Time& t_warmup, const Time& t_max, double ssr,
                       const std::string& who) {
  WarmupSpan span{convert_time(t_warmup, state, 1.0), convert_time(t_max, state, ssr)};
  if (span.warmup.unit() != span.max.unit()) {
    throw std::invalid_argument(who + ": t_warmup (" + span.warmup.to_string() + ") and t_max (" +
                                span.max.to_string() + ") must have the same unit");
  }
  require_t_max_covers_max_duration(span.max, state, who);
  warn_zero_warmup(span.warmup, who);
  return span;
}

// The warmup ramp from 0 to `alpha` over t_warmup (stretched by ssr when scale_warmup).
double warmup_ramp(const State& state, const Time& t_warmup, double alpha, double ssr, bool scale_warmup) {
  return LinearScheduler(0.0, alpha, t_warmup)(state, scale_warmup ? ssr : 1.0);
}

// Fraction of the post-warmup span elapsed, at most 1.
double post_warmup_fraction(const State& state, const WarmupSpan& span) {
  if (!(span.max > span.warmup)) return 0.0;
  const Time now = state.timestamp.get(span.warmup.unit());
  return std::min(1.0, ((now - span.warmup) / (span.max - span.warmup)).value());
}

}  // namespace

std::string ComposerScheduler::name() const { return class_name_of(*this); }

Time convert_time(const Time& time, const State& state, double ssr) {
  if (!state.max_duration)
    throw std::invalid_argument("scheduler: max_duration must be set to convert " + time.to_string());
  if (time.unit() == TimeUnit::SECOND) {
    throw std::invalid_argument("scheduler: wall-clock time " + time.to_string() +
                                " is not an allowed unit (as in Composer)");
  }
  const Time& max = *state.max_duration;
  auto need_len = [&]() -> int64_t {
    if (!state.dataloader_len) {
      throw std::invalid_argument("scheduler: cannot convert " + time.to_string() +
                                  " to batches: the dataloader has no length");
    }
    return *state.dataloader_len;
  };
  if (time.unit() == TimeUnit::DURATION) {
    if (max.unit() == TimeUnit::EPOCH) {
      return Time(std::trunc(time.value() * static_cast<double>(need_len()) * max.value()), TimeUnit::BATCH);
    }
    return Time(std::trunc(time.value() * max.value()), max.unit());
  }
  Time t = time;
  if (t.unit() == TimeUnit::EPOCH) t = Time(t.value() * static_cast<double>(need_len()), TimeUnit::BATCH);
  return Time(std::trunc(t.value() * ssr), t.unit());
}

StepScheduler::StepScheduler(Time step_size, double gamma) : step_size_(step_size), gamma_(gamma) {}
double StepScheduler::operator()(const State& state, double ssr) const {
  const Time step = convert_time(step_size_, state, ssr);
  return std::pow(gamma_, std::floor(ratio(state, step)));
}

MultiStepScheduler::MultiStepScheduler(std::vector<Time> milestones, double gamma)
    : milestones_(std::move(milestones)), gamma_(gamma) {}
double MultiStepScheduler::operator()(const State& state, double ssr) const {
  double factor = 1.0;
  for (const auto& m : milestones_)
    if (state.timestamp >= convert_time(m, state, ssr)) factor *= gamma_;
  return factor;
}

ConstantScheduler::ConstantScheduler(double alpha, Time t_max) : alpha_(alpha), t_max_(t_max) {}
double ConstantScheduler::operator()(const State& state, double ssr) const {
  return state.timestamp < convert_time(t_max_, state, ssr) ? alpha_ : 1.0;
}

LinearScheduler::LinearScheduler(double alpha_i, double alpha_f, Time t_max)
    : alpha_i_(alpha_i), alpha_f_(alpha_f), t_max_(t_max) {}
double LinearScheduler::operator()(const State& state, double ssr) const {
  const double frac = std::min(1.0, ratio(state, convert_time(t_max_, state, ssr)));
  return alpha_i_ + frac * (alpha_f_ - alpha_i_);
}

ExponentialScheduler::ExponentialScheduler(double gamma, Time decay_period)
    : gamma_(gamma), decay_period_(decay_period) {}
double ExponentialScheduler::operator()(const State& state, double ssr) const {
  return std::pow(gamma_, ratio(state, convert_time(decay_period_, state, ssr)));
}

CosineAnnealingScheduler::CosineAnnealingScheduler(Time t_max, double alpha_f) : t_max_(t_max), alpha_f_(alpha_f) {}
double CosineAnnealingScheduler::operator()(const State& state, double ssr) const {
  return cosine_anneal(ratio(state, convert_time(t_max_, state, ssr)), alpha_f_);
}

CosineAnnealingWarmRestartsScheduler::CosineAnnealingWarmRestartsScheduler(Time t_0, double t_mult, double alpha_f)
    : t_0_(t_0), t_mult_(t_mult), alpha_f_(alpha_f) {}
double CosineAnnealingWarmRestartsScheduler::operator()(const State& state, double ssr) const {
  const Time t0 = convert_time(t_0_, state, ssr);
  const Time now = state.timestamp.get(t0.unit());
  Time len = t0, end = t0;
  while (end <= now) {
    if (len.value() == 0) {
      throw std::invalid_argument("CosineAnnealingWarmRestartsScheduler: the interval between restarts decayed to 0");
    }
    len = Time(std::trunc(t_mult_ * len.value()), len.unit());
    end = end + len;
  }
  const Time start = end - len;
  return cosine_anneal(((now - start) / len).value(), alpha_f_);
}

PolynomialScheduler::PolynomialScheduler(double power, Time t_max, double alpha_f)
    : power_(power), t_max_(t_max), alpha_f_(alpha_f) {}
double PolynomialScheduler::operator()(const State& state, double ssr) const {
  const double frac = std::min(1.0, ratio(state, convert_time(t_max_, state, ssr)));
  return alpha_f_ + std::pow(1.0 - frac, power_) * (1.0 - alpha_f_);
}

LinearWithWarmupScheduler::LinearWithWarmupScheduler(Time t_warmup, double alpha_i, double alpha_f, Time t_max,
                                                     bool scale_warmup)
    : t_warmup_(t_warmup), alpha_i_(alpha_i), alpha_f_(alpha_f), t_max_(t_max), scale_warmup_(scale_warmup) {}
double LinearWithWarmupScheduler::operator()(const State& state, double ssr) const {
  const WarmupSpan span = warmup_span(state, t_warmup_, t_max_, ssr, name());
  if (state.timestamp < span.warmup) return warmup_ramp(state, t_warmup_, alpha_i_, ssr, scale_warmup_);
  return alpha_i_ + post_warmup_fraction(state, span) * (alpha_f_ - alpha_i_);
}

ConstantWithWarmupScheduler::ConstantWithWarmupScheduler(Time t_warmup, double alpha, Time t_max, bool scale_warmup)
    : inner_(t_warmup, alpha, alpha, t_max, scale_warmup) {}
double ConstantWithWarmupScheduler::operator()(const State& state, double ssr) const { return inner_(state, ssr); }

CosineAnnealingWithWarmupScheduler::CosineAnnealingWithWarmupScheduler(Time t_warmup, Time t_max, double alpha_f,
                                                                       bool scale_warmup)
    : t_warmup_(t_warmup), t_max_(t_max), alpha_f_(alpha_f), scale_warmup_(scale_warmup) {}
double CosineAnnealingWithWarmupScheduler::operator()(const State& state, double ssr) const {
  const WarmupSpan span = warmup_span(state, t_warmup_, t_max_, ssr, name());
  if (state.timestamp < span.warmup) return warmup_ramp(state, t_warmup_, 1.0, ssr, scale_warmup_);
  return cosine_anneal(post_warmup_fraction(state, span), alpha_f_);
}

PolynomialWithWarmupScheduler::PolynomialWithWarmupScheduler(Time t_warmup, double power, Time t_max, double alpha_f,
                                                             bool scale_warmup)
    : t_warmup_(t_warmup), power_(power), t_max_(t_max), alpha_f_(alpha_f), scale_warmup_(scale_warmup) {}
double PolynomialWithWarmupScheduler::operator()(const State& state, double ssr) const {
  const WarmupSpan span = warmup_span(state, t_warmup_, t_max_, ssr, name());
  if (state.timestamp < span.warmup) return warmup_ramp(state, t_warmup_, 1.0, ssr, scale_warmup_);
  return alpha_f_ + std::pow(1.0 - post_warmup_fraction(state, span), power_) * (1.0 - alpha_f_);
}

MultiStepWithWarmupScheduler::MultiStepWithWarmupScheduler(Time t_warmup, std::vector<Time> milestones, double gamma,
                                                           bool scale_warmup)
    : t_warmup_(t_warmup), steps_(std::move(milestones), gamma), scale_warmup_(scale_warmup) {}
double MultiStepWithWarmupScheduler::operator()(const State& state, double ssr) const {
  const Time tw = convert_time(t_warmup_, state, 1.0);
  warn_zero_warmup(tw, name());
  if (state.timestamp < tw) return warmup_ramp(state, t_warmup_, 1.0, ssr, scale_warmup_);
  return steps_(state, ssr);
}

void apply_schedulers(State& state, const std::vector<double>& base_lrs, double ssr) {
  if (!state.optimizer || state.schedulers.empty()) return;
  double factor = 1.0;
  for (const auto& s : state.schedulers) factor *= (*s)(state, ssr);
  auto& groups = state.optimizer->param_groups();
  if (groups.size() != base_lrs.size()) {
    throw std::logic_error("apply_schedulers: " + std::to_string(base_lrs.size()) + " base lrs for " +
                           std::to_string(groups.size()) + " parameter groups");
  }
  for (size_t i = 0; i < groups.size(); ++i) groups[i].options().set_lr(base_lrs[i] * factor);
}

}  // namespace composer
