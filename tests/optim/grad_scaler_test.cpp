#include "support/test_support.h"

#include <gtest/gtest.h>

#include <limits>

namespace composer {
namespace {

TEST(GradScalerTest, SkipsStepOnInfAndBacksOff) {
  at::Tensor p = torch::tensor({1.0f, 2.0f}).requires_grad_();
  torch::optim::SGD opt({p}, torch::optim::SGDOptions(0.1));
  GradScaler scaler(GradScalerOptions().init_scale(1024.0).growth_interval(2));
  EXPECT_DOUBLE_EQ(scaler.scale(at::ones({})).item<double>(), 1024.0);

  p.mutable_grad() = torch::tensor({std::numeric_limits<float>::infinity(), 1.0f});
  EXPECT_FALSE(scaler.step(opt));
  EXPECT_TRUE(scaler.found_inf());
  scaler.update();
  EXPECT_TRUE(torch::equal(p, torch::tensor({1.0f, 2.0f})));  // step skipped
  EXPECT_DOUBLE_EQ(scaler.get_scale(), 512.0);

  p.mutable_grad() = torch::tensor({512.0f, 1024.0f});  // scaled grads: unscaled (1, 2)
  EXPECT_TRUE(scaler.step(opt));
  scaler.update();
  EXPECT_TRUE(torch::allclose(p, torch::tensor({0.9f, 1.8f})));
  EXPECT_DOUBLE_EQ(scaler.get_scale(), 512.0);  // one clean step of two

  p.mutable_grad() = torch::tensor({0.0f, 0.0f});
  scaler.step(opt);
  scaler.update();
  EXPECT_DOUBLE_EQ(scaler.get_scale(), 1024.0);  // grew after growth_interval clean steps
}

TEST(GradScalerTest, NanAlsoSkips) {
  at::Tensor p = torch::tensor({1.0f}).requires_grad_();
  torch::optim::SGD opt({p}, torch::optim::SGDOptions(0.1));
  GradScaler scaler;
  p.mutable_grad() = torch::tensor({std::numeric_limits<float>::quiet_NaN()});
  scaler.unscale_(opt);
  EXPECT_THROW(scaler.unscale_(opt), std::logic_error);  // once per step
  EXPECT_FALSE(scaler.step(opt));
  scaler.update();
  EXPECT_EQ(p.item<float>(), 1.0f);
}

TEST(GradScalerTest, StateRoundTrips) {
  GradScaler a(GradScalerOptions().init_scale(8.0).growth_interval(3));
  at::Tensor p = torch::tensor({1.0f}).requires_grad_();
  torch::optim::SGD opt({p}, torch::optim::SGDOptions(0.1));
  p.mutable_grad() = torch::tensor({1.0f});
  a.step(opt);
  a.update();
  GradScaler b;
  b.load_state_dict(torch::pickle_load(torch::pickle_save(a.state_dict())));
  EXPECT_DOUBLE_EQ(b.get_scale(), 8.0);
  const auto d = b.state_dict().toGenericDict();
  EXPECT_EQ(d.at("_growth_tracker").toInt(), 1);
  EXPECT_EQ(d.at("growth_interval").toInt(), 3);
}

TEST(GradScalerTest, DisabledIsPassThrough) {
  GradScaler s(GradScalerOptions().enabled(false));
  const at::Tensor l = at::full({}, 3.0);
  EXPECT_TRUE(torch::equal(s.scale(l), l));
}

TEST(GradScalerTest, RejectsBadOptions) {
  EXPECT_THROW(GradScaler(GradScalerOptions().backoff_factor(2.0)), std::invalid_argument);
  EXPECT_THROW(GradScaler(GradScalerOptions().growth_interval(0)), std::invalid_argument);
}

}  // namespace
}  // namespace composer
