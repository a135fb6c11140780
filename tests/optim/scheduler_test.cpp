#include "composer/optim/scheduler.h"
#include "composer/core/state.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>

namespace composer {
namespace {

constexpr double kPi = 3.14159265358979323846;

State state_at(int64_t batch, Time max = Time(100, TimeUnit::BATCH), int64_t dataloader_len = 10) {
  State s;
  s.max_duration = max;
  s.dataloader_len = dataloader_len;
  s.timestamp.batch = batch;
  s.timestamp.epoch = batch / dataloader_len;
  s.timestamp.batch_in_epoch = batch % dataloader_len;
  s.timestamp.sample = batch * 8;
  return s;
}

Time ba(int64_t v) { return Time(v, TimeUnit::BATCH); }
Time dur(double v) { return Time(v, TimeUnit::DURATION); }

void expect_matches(const ComposerScheduler& sched, const std::function<double(double)>& formula, double ssr = 1.0,
                    Time max = ba(100)) {
  for (int64_t t = 0; t <= 120; t += 3) {
    EXPECT_NEAR(sched(state_at(t, max), ssr), formula(static_cast<double>(t)), 1e-12) << sched.name() << " at t=" << t;
  }
}

double cosine(double x, double af) { return af + (1 - af) * (1 + std::cos(kPi * x)) / 2; }

TEST(SchedulerTest, Step) {
  expect_matches(StepScheduler(StepSchedulerOptions().step_size(ba(10)).gamma(0.5)),
                 [](double t) { return std::pow(0.5, std::floor(t / 10)); });
  // "1ep" is converted to 10 batches through dataloader_len, then scaled by ssr.
  expect_matches(
      StepScheduler(Time(1, TimeUnit::EPOCH)), [](double t) { return std::pow(0.1, std::floor(t / 5)); }, 0.5);
}

TEST(SchedulerTest, MultiStep) {
  expect_matches(MultiStepScheduler({ba(20), ba(50)}), [](double t) { return t >= 50 ? 0.01 : (t >= 20 ? 0.1 : 1.0); });
}

TEST(SchedulerTest, Constant) {
  expect_matches(ConstantScheduler(ConstantSchedulerOptions().alpha(0.5).t_max(ba(30))),
                 [](double t) { return t < 30 ? 0.5 : 1.0; });
}

TEST(SchedulerTest, Linear) {
  expect_matches(LinearScheduler(), [](double t) { return 1.0 - std::min(1.0, t / 100); });
  expect_matches(
      LinearScheduler(LinearSchedulerOptions().alpha_i(0.2).alpha_f(1.0).t_max(ba(100))),
      [](double t) { return 0.2 + std::min(1.0, t / 50) * 0.8; }, 0.5);
}

TEST(SchedulerTest, DurationWithEpochMaxConvertsThroughDataloaderLength) {
  // max 5ep x 10 batches -> t_max = 50 batches; dur is not scaled by ssr.
  const Time max(5, TimeUnit::EPOCH);
  expect_matches(
      LinearScheduler(), [](double t) { return 1.0 - std::min(1.0, t / 50); }, 0.5, max);
}

TEST(SchedulerTest, Exponential) {
  expect_matches(ExponentialScheduler(ExponentialSchedulerOptions().gamma(0.9).decay_period(ba(10))),
                 [](double t) { return std::pow(0.9, t / 10); });
}

TEST(SchedulerTest, CosineAnnealing) {
  expect_matches(CosineAnnealingScheduler(CosineAnnealingSchedulerOptions().alpha_f(0.1)),
                 [](double t) { return cosine(std::min(1.0, t / 100), 0.1); });
}

TEST(SchedulerTest, CosineAnnealingWarmRestarts) {
  // Intervals [0,10), [10,30), [30,70), [70,150) with t_mult 2.
  auto reference = [](double t) {
    double start = 0, len = 10;
    while (start + len <= t) {
      start += len;
      len = std::trunc(2 * len);
    }
    return cosine((t - start) / len, 0.05);
  };
  expect_matches(CosineAnnealingWarmRestartsScheduler(
                     CosineAnnealingWarmRestartsSchedulerOptions().t_0(ba(10)).t_mult(2.0).alpha_f(0.05)),
                 reference);
}

TEST(SchedulerTest, Polynomial) {
  expect_matches(PolynomialScheduler(PolynomialSchedulerOptions().power(2.0).alpha_f(0.1)),
                 [](double t) { return 0.1 + std::pow(1 - std::min(1.0, t / 100), 2.0) * 0.9; });
}

TEST(SchedulerTest, LinearWithWarmup) {
  expect_matches(LinearWithWarmupScheduler(ba(10)),
                 [](double t) { return t < 10 ? t / 10 : 1.0 - std::min(1.0, (t - 10) / 90); });
}

TEST(SchedulerTest, WarmupIsNotScaledUnlessAsked) {
  // ssr 0.5 (the Trainer's max_duration becomes 50 batches): t_max becomes 50, the warmup stays 10 batches.
  expect_matches(
      LinearWithWarmupScheduler(LinearWithWarmupSchedulerOptions().t_warmup(ba(10)).t_max(ba(100))),
      [](double t) { return t < 10 ? t / 10 : 1.0 - std::min(1.0, (t - 10) / 40); }, 0.5, ba(50));
  // scale_warmup, as Composer: the ramp reaches 1 after 5 batches and holds it; the warmup still ends (and the decay
  // starts) at 10 batches.
  expect_matches(
      LinearWithWarmupScheduler(LinearWithWarmupSchedulerOptions().t_warmup(ba(10)).t_max(ba(100)).scale_warmup(true)),
      [](double t) { return t < 10 ? std::min(1.0, t / 5) : 1.0 - std::min(1.0, (t - 10) / 40); }, 0.5, ba(50));
  // t_max shorter than max_duration is an error, as in Composer.
  EXPECT_THROW(
      LinearWithWarmupScheduler(LinearWithWarmupSchedulerOptions().t_warmup(ba(10)).t_max(ba(50)))(state_at(20), 1.0),
      std::invalid_argument);
}

TEST(SchedulerTest, ConstantWithWarmup) {
  expect_matches(ConstantWithWarmupScheduler(ConstantWithWarmupSchedulerOptions().t_warmup(ba(10)).alpha(0.5)),
                 [](double t) { return t < 10 ? 0.5 * t / 10 : 0.5; });
}

TEST(SchedulerTest, CosineAnnealingWithWarmup) {
  expect_matches(CosineAnnealingWithWarmupScheduler(ba(10)),
                 [](double t) { return t < 10 ? t / 10 : cosine(std::min(1.0, (t - 10) / 90), 0.0); });
}

TEST(SchedulerTest, PolynomialWithWarmup) {
  expect_matches(PolynomialWithWarmupScheduler(ba(10)),
                 [](double t) { return t < 10 ? t / 10 : std::pow(1 - std::min(1.0, (t - 10) / 90), 2.0); });
}

TEST(SchedulerTest, MultiStepWithWarmup) {
  expect_matches(MultiStepWithWarmupScheduler(MultiStepWithWarmupSchedulerOptions().t_warmup(ba(10)).milestones(
                     std::vector<Time>{ba(30), ba(60)})),
                 [](double t) { return t < 10 ? t / 10 : (t >= 60 ? 0.01 : (t >= 30 ? 0.1 : 1.0)); });
}

TEST(SchedulerTest, ConversionErrorsNameTheProblem) {
  State s;
  EXPECT_THROW(convert_time(ba(3), s), std::invalid_argument);  // no max_duration
  s.max_duration = Time(2, TimeUnit::EPOCH);
  EXPECT_THROW(convert_time(Time(1, TimeUnit::EPOCH), s), std::invalid_argument);  // no dataloader length
  s.dataloader_len = 7;
  EXPECT_EQ(convert_time(Time(1, TimeUnit::EPOCH), s, 2.0), ba(14));
  EXPECT_EQ(convert_time(dur(0.5), s), ba(7));
  EXPECT_EQ(convert_time(Time(33, TimeUnit::SAMPLE), s, 0.5), Time(16, TimeUnit::SAMPLE));
}

TEST(SchedulerTest, WarmupAndMaxMustShareUnits) {
  State s = state_at(20);
  LinearWithWarmupScheduler bad(LinearWithWarmupSchedulerOptions().t_warmup(Time(8, TimeUnit::SAMPLE)).t_max(ba(100)));
  EXPECT_THROW(bad(s), std::invalid_argument);
}

TEST(SchedulerTest, RequiredArgumentsAreNamedWhenUnset) {
  try {
    LinearWithWarmupScheduler s{LinearWithWarmupSchedulerOptions()};
    FAIL() << "an unset t_warmup was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "LinearWithWarmupScheduler: t_warmup is required (a time such as '100ba')");
  }
  EXPECT_THROW(MultiStepWithWarmupScheduler(MultiStepWithWarmupSchedulerOptions().t_warmup(ba(1))),
               std::invalid_argument);
  EXPECT_THROW(ExponentialScheduler{ExponentialSchedulerOptions()}, std::invalid_argument);
}

TEST(SchedulerTest, ReprListsTheFieldsInComposersOrder) {
  EXPECT_EQ(LinearWithWarmupScheduler(ba(10)).repr(),
            "LinearWithWarmupScheduler(t_warmup='10ba', alpha_i=1.0, alpha_f=0.0, t_max='1.0dur', scale_warmup=False)");
  EXPECT_EQ(MultiStepScheduler({ba(20), Time(3, TimeUnit::EPOCH)}).repr(),
            "MultiStepScheduler(milestones=['20ba', '3ep'], gamma=0.1)");
}

}  // namespace
}  // namespace composer
