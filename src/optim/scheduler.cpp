#include "composer/optim/scheduler.h"

#include "composer/core/fields.h"
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

double linear(const State& state, double alpha_i, double alpha_f, const Time& t_max, double ssr) {
  const double frac = std::min(1.0, ratio(state, convert_time(t_max, state, ssr)));
  return alpha_i + frac * (alpha_f - alpha_i);
}

double multistep(const State& state, const std::vector<Time>& milestones, double gamma, double ssr) {
  double factor = 1.0;
  for (const auto& m : milestones)
    if (state.timestamp >= convert_time(m, state, ssr)) factor *= gamma;
  return factor;
}

// The warmup ramp from 0 to `alpha` over t_warmup (stretched by ssr when scale_warmup).
double warmup_ramp(const State& state, const Time& t_warmup, double alpha, double ssr, bool scale_warmup) {
  return linear(state, 0.0, alpha, t_warmup, scale_warmup ? ssr : 1.0);
}

// Fraction of the post-warmup span elapsed, at most 1.
double post_warmup_fraction(const State& state, const WarmupSpan& span) {
  if (!(span.max > span.warmup)) return 0.0;
  const Time now = state.timestamp.get(span.warmup.unit());
  return std::min(1.0, ((now - span.warmup) / (span.max - span.warmup)).value());
}

double linear_with_warmup(const State& state, const Time& t_warmup, double alpha_i, double alpha_f, const Time& t_max,
                          bool scale_warmup, double ssr, const std::string& who) {
  const WarmupSpan span = warmup_span(state, t_warmup, t_max, ssr, who);
  if (state.timestamp < span.warmup) return warmup_ramp(state, t_warmup, alpha_i, ssr, scale_warmup);
  return alpha_i + post_warmup_fraction(state, span) * (alpha_f - alpha_i);
}

void require_warmup(const Required<Time>& t_warmup, const char* who) {
  required_value(t_warmup, who, "t_warmup", "a time such as '100ba'");
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

StepScheduler::StepScheduler(StepSchedulerOptions options) : options_(std::move(options)) {
  required_value(options_.step_size(), "StepScheduler", "step_size", "a time such as '10ep'");
}
StepScheduler::StepScheduler(Time step_size) : StepScheduler(StepSchedulerOptions().step_size(step_size)) {}
double StepScheduler::operator()(const State& state, double ssr) const {
  const Time step = convert_time(*options_.step_size(), state, ssr);
  return std::pow(options_.gamma(), std::floor(ratio(state, step)));
}
std::string StepScheduler::repr() const { return options_repr("StepScheduler", options_); }

MultiStepScheduler::MultiStepScheduler(MultiStepSchedulerOptions options) : options_(std::move(options)) {
  required_value(options_.milestones(), "MultiStepScheduler", "milestones", "a list of times such as ['10ep', '20ep']");
}
MultiStepScheduler::MultiStepScheduler(std::vector<Time> milestones)
    : MultiStepScheduler(MultiStepSchedulerOptions().milestones(std::move(milestones))) {}
double MultiStepScheduler::operator()(const State& state, double ssr) const {
  return multistep(state, *options_.milestones(), options_.gamma(), ssr);
}
std::string MultiStepScheduler::repr() const { return options_repr("MultiStepScheduler", options_); }

ConstantScheduler::ConstantScheduler(ConstantSchedulerOptions options) : options_(std::move(options)) {}
double ConstantScheduler::operator()(const State& state, double ssr) const {
  return state.timestamp < convert_time(options_.t_max(), state, ssr) ? options_.alpha() : 1.0;
}
std::string ConstantScheduler::repr() const { return options_repr("ConstantScheduler", options_); }

LinearScheduler::LinearScheduler(LinearSchedulerOptions options) : options_(std::move(options)) {}
double LinearScheduler::operator()(const State& state, double ssr) const {
  return linear(state, options_.alpha_i(), options_.alpha_f(), options_.t_max(), ssr);
}
std::string LinearScheduler::repr() const { return options_repr("LinearScheduler", options_); }

ExponentialScheduler::ExponentialScheduler(ExponentialSchedulerOptions options) : options_(std::move(options)) {
  required_value(options_.gamma(), "ExponentialScheduler", "gamma", "a number");
}
ExponentialScheduler::ExponentialScheduler(double gamma)
    : ExponentialScheduler(ExponentialSchedulerOptions().gamma(gamma)) {}
double ExponentialScheduler::operator()(const State& state, double ssr) const {
  return std::pow(*options_.gamma(), ratio(state, convert_time(options_.decay_period(), state, ssr)));
}
std::string ExponentialScheduler::repr() const { return options_repr("ExponentialScheduler", options_); }

CosineAnnealingScheduler::CosineAnnealingScheduler(CosineAnnealingSchedulerOptions options)
    : options_(std::move(options)) {}
double CosineAnnealingScheduler::operator()(const State& state, double ssr) const {
  return cosine_anneal(ratio(state, convert_time(options_.t_max(), state, ssr)), options_.alpha_f());
}
std::string CosineAnnealingScheduler::repr() const { return options_repr("CosineAnnealingScheduler", options_); }

CosineAnnealingWarmRestartsScheduler::CosineAnnealingWarmRestartsScheduler(
    CosineAnnealingWarmRestartsSchedulerOptions options)
    : options_(std::move(options)) {
  required_value(options_.t_0(), "CosineAnnealingWarmRestartsScheduler", "t_0", "a time such as '10ep'");
}
CosineAnnealingWarmRestartsScheduler::CosineAnnealingWarmRestartsScheduler(Time t_0)
    : CosineAnnealingWarmRestartsScheduler(CosineAnnealingWarmRestartsSchedulerOptions().t_0(t_0)) {}
double CosineAnnealingWarmRestartsScheduler::operator()(const State& state, double ssr) const {
  const Time t0 = convert_time(*options_.t_0(), state, ssr);
  const Time now = state.timestamp.get(t0.unit());
  Time len = t0, end = t0;
  while (end <= now) {
    if (len.value() == 0) {
      throw std::invalid_argument("CosineAnnealingWarmRestartsScheduler: the interval between restarts decayed to 0");
    }
    len = Time(std::trunc(options_.t_mult() * len.value()), len.unit());
    end = end + len;
  }
  const Time start = end - len;
  return cosine_anneal(((now - start) / len).value(), options_.alpha_f());
}
std::string CosineAnnealingWarmRestartsScheduler::repr() const {
  return options_repr("CosineAnnealingWarmRestartsScheduler", options_);
}

PolynomialScheduler::PolynomialScheduler(PolynomialSchedulerOptions options) : options_(std::move(options)) {
  required_value(options_.power(), "PolynomialScheduler", "power", "a number");
}
PolynomialScheduler::PolynomialScheduler(double power)
    : PolynomialScheduler(PolynomialSchedulerOptions().power(power)) {}
double PolynomialScheduler::operator()(const State& state, double ssr) const {
  const double frac = std::min(1.0, ratio(state, convert_time(options_.t_max(), state, ssr)));
  return options_.alpha_f() + std::pow(1.0 - frac, *options_.power()) * (1.0 - options_.alpha_f());
}
std::string PolynomialScheduler::repr() const { return options_repr("PolynomialScheduler", options_); }

LinearWithWarmupScheduler::LinearWithWarmupScheduler(LinearWithWarmupSchedulerOptions options)
    : options_(std::move(options)) {
  require_warmup(options_.t_warmup(), "LinearWithWarmupScheduler");
}
LinearWithWarmupScheduler::LinearWithWarmupScheduler(Time t_warmup)
    : LinearWithWarmupScheduler(LinearWithWarmupSchedulerOptions().t_warmup(t_warmup)) {}
double LinearWithWarmupScheduler::operator()(const State& state, double ssr) const {
  return linear_with_warmup(state, *options_.t_warmup(), options_.alpha_i(), options_.alpha_f(), options_.t_max(),
                            options_.scale_warmup(), ssr, name());
}
std::string LinearWithWarmupScheduler::repr() const { return options_repr("LinearWithWarmupScheduler", options_); }

ConstantWithWarmupScheduler::ConstantWithWarmupScheduler(ConstantWithWarmupSchedulerOptions options)
    : options_(std::move(options)) {
  require_warmup(options_.t_warmup(), "ConstantWithWarmupScheduler");
}
ConstantWithWarmupScheduler::ConstantWithWarmupScheduler(Time t_warmup)
    : ConstantWithWarmupScheduler(ConstantWithWarmupSchedulerOptions().t_warmup(t_warmup)) {}
double ConstantWithWarmupScheduler::operator()(const State& state, double ssr) const {
  return linear_with_warmup(state, *options_.t_warmup(), options_.alpha(), options_.alpha(), options_.t_max(),
                            options_.scale_warmup(), ssr, name());
}
std::string ConstantWithWarmupScheduler::repr() const { return options_repr("ConstantWithWarmupScheduler", options_); }

CosineAnnealingWithWarmupScheduler::CosineAnnealingWithWarmupScheduler(
    CosineAnnealingWithWarmupSchedulerOptions options)
    : options_(std::move(options)) {
  require_warmup(options_.t_warmup(), "CosineAnnealingWithWarmupScheduler");
}
CosineAnnealingWithWarmupScheduler::CosineAnnealingWithWarmupScheduler(Time t_warmup)
    : CosineAnnealingWithWarmupScheduler(CosineAnnealingWithWarmupSchedulerOptions().t_warmup(t_warmup)) {}
double CosineAnnealingWithWarmupScheduler::operator()(const State& state, double ssr) const {
  const Time& t_warmup = *options_.t_warmup();
  const WarmupSpan span = warmup_span(state, t_warmup, options_.t_max(), ssr, name());
  if (state.timestamp < span.warmup) return warmup_ramp(state, t_warmup, 1.0, ssr, options_.scale_warmup());
  return cosine_anneal(post_warmup_fraction(state, span), options_.alpha_f());
}
std::string CosineAnnealingWithWarmupScheduler::repr() const {
  return options_repr("CosineAnnealingWithWarmupScheduler", options_);
}

PolynomialWithWarmupScheduler::PolynomialWithWarmupScheduler(PolynomialWithWarmupSchedulerOptions options)
    : options_(std::move(options)) {
  require_warmup(options_.t_warmup(), "PolynomialWithWarmupScheduler");
}
PolynomialWithWarmupScheduler::PolynomialWithWarmupScheduler(Time t_warmup)
    : PolynomialWithWarmupScheduler(PolynomialWithWarmupSchedulerOptions().t_warmup(t_warmup)) {}
double PolynomialWithWarmupScheduler::operator()(const State& state, double ssr) const {
  const Time& t_warmup = *options_.t_warmup();
  const WarmupSpan span = warmup_span(state, t_warmup, options_.t_max(), ssr, name());
  if (state.timestamp < span.warmup) return warmup_ramp(state, t_warmup, 1.0, ssr, options_.scale_warmup());
  const double alpha_f = options_.alpha_f();
  return alpha_f + std::pow(1.0 - post_warmup_fraction(state, span), options_.power()) * (1.0 - alpha_f);
}
std::string PolynomialWithWarmupScheduler::repr() const {
  return options_repr("PolynomialWithWarmupScheduler", options_);
}

MultiStepWithWarmupScheduler::MultiStepWithWarmupScheduler(MultiStepWithWarmupSchedulerOptions options)
    : options_(std::move(options)) {
  require_warmup(options_.t_warmup(), "MultiStepWithWarmupScheduler");
  required_value(options_.milestones(), "MultiStepWithWarmupScheduler", "milestones",
                 "a list of times such as ['10ep', '20ep']");
}
double MultiStepWithWarmupScheduler::operator()(const State& state, double ssr) const {
  const Time& t_warmup = *options_.t_warmup();
  const Time tw = convert_time(t_warmup, state, 1.0);
  warn_zero_warmup(tw, name());
  if (state.timestamp < tw) return warmup_ramp(state, t_warmup, 1.0, ssr, options_.scale_warmup());
  return multistep(state, *options_.milestones(), options_.gamma(), ssr);
}
std::string MultiStepWithWarmupScheduler::repr() const {
  return options_repr("MultiStepWithWarmupScheduler", options_);
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
