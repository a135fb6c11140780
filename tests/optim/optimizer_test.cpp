#include "support/test_support.h"

#include "composer/optim/optimizer.h"

#include <torch/serialize.h>

#include <gtest/gtest.h>

#include <cmath>

namespace composer {
namespace {

// Three steps with fixed gradients; the lr drops to half of initial_lr before the third step.
const std::vector<std::array<double, 2>> kGrads{{0.5, 0.1}, {-0.3, 0.2}, {0.1, -0.4}};

template <class Opt>
std::vector<double> run(Opt& opt, at::Tensor& p) {
  for (size_t s = 0; s < kGrads.size(); ++s) {
    if (s == 2) opt.param_groups()[0].options().set_lr(opt.param_groups()[0].options().get_lr() / 2);
    p.mutable_grad() = torch::tensor({kGrads[s][0], kGrads[s][1]}, at::kDouble);
    opt.step();
  }
  return {p[0].item<double>(), p[1].item<double>()};
}

TEST(DecoupledSGDWTest, MatchesHandComputedSteps) {
  for (bool nesterov : {false, true}) {
    at::Tensor p = torch::tensor({1.0, -2.0}, at::kDouble).requires_grad_();
    optim::DecoupledSGDW opt({p}, optim::DecoupledSGDWOptions(0.1).momentum(0.9).weight_decay(1e-4).nesterov(nesterov));
    const auto got = run(opt, p);
    // Hand computation of Composer's DecoupledSGDW.
    double x[2] = {1.0, -2.0}, buf[2] = {0, 0};
    const double initial_lr = 0.1, mu = 0.9, wd = 1e-4;
    for (size_t s = 0; s < kGrads.size(); ++s) {
      const double lr = s == 2 ? 0.05 : 0.1;
      for (int i = 0; i < 2; ++i) {
        const double g = kGrads[s][i];
        buf[i] = s == 0 ? g : mu * buf[i] + g;
        const double d = nesterov ? g + mu * buf[i] : buf[i];
        x[i] *= 1 - (lr / initial_lr) * wd;
        x[i] -= lr * d;
      }
    }
    EXPECT_NEAR(got[0], x[0], 1e-15) << "nesterov=" << nesterov;
    EXPECT_NEAR(got[1], x[1], 1e-15) << "nesterov=" << nesterov;
  }
}

TEST(DecoupledSGDWTest, PlainSgdWithoutMomentum) {
  at::Tensor p = torch::tensor({1.0, -2.0}, at::kDouble).requires_grad_();
  optim::DecoupledSGDW opt({p}, optim::DecoupledSGDWOptions(0.1));
  const auto got = run(opt, p);
  EXPECT_NEAR(got[0], 1.0 - 0.1 * 0.5 - 0.1 * -0.3 - 0.05 * 0.1, 1e-15);
  EXPECT_NEAR(got[1], -2.0 - 0.1 * 0.1 - 0.1 * 0.2 - 0.05 * -0.4, 1e-15);
}

TEST(DecoupledSGDWTest, RejectsBadOptions) {
  at::Tensor p = at::zeros({2}, at::kDouble).requires_grad_();
  EXPECT_THROW(optim::DecoupledSGDW({p}, optim::DecoupledSGDWOptions(-1)), std::invalid_argument);
  EXPECT_THROW(optim::DecoupledSGDW({p}, optim::DecoupledSGDWOptions(0.1).nesterov(true)), std::invalid_argument);
}

TEST(DecoupledAdamWTest, MatchesHandComputedSteps) {
  for (bool amsgrad : {false, true}) {
    at::Tensor p = torch::tensor({1.0, -2.0}, at::kDouble).requires_grad_();
    optim::DecoupledAdamW opt({p}, optim::DecoupledAdamWOptions(1e-2).weight_decay(1e-4).amsgrad(amsgrad));
    const auto got = run(opt, p);
    double x[2] = {1.0, -2.0}, m[2] = {0, 0}, v[2] = {0, 0}, vmax[2] = {0, 0};
    const double b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 1e-4, initial_lr = 1e-2;
    for (size_t s = 0; s < kGrads.size(); ++s) {
      const double lr = s == 2 ? 5e-3 : 1e-2;
      const double t = static_cast<double>(s + 1);
      for (int i = 0; i < 2; ++i) {
        const double g = kGrads[s][i];
        x[i] *= 1 - (lr / initial_lr) * wd;
        m[i] = b1 * m[i] + (1 - b1) * g;
        v[i] = b2 * v[i] + (1 - b2) * g * g;
        vmax[i] = std::max(vmax[i], v[i]);
        const double second = amsgrad ? vmax[i] : v[i];
        x[i] -= (lr / (1 - std::pow(b1, t))) * m[i] / (std::sqrt(second) / std::sqrt(1 - std::pow(b2, t)) + eps);
      }
    }
    EXPECT_NEAR(got[0], x[0], 1e-14) << "amsgrad=" << amsgrad;
    EXPECT_NEAR(got[1], x[1], 1e-14) << "amsgrad=" << amsgrad;
  }
}

// Graph-capture mode (TrainStepOptions::cuda_graph) reads the lr from a device tensor that refresh_graph_scalars()
// fills before each step, and DecoupledAdamW steps through the fused kernel with its step counts on the device; the
// steps stay those of the host-scalar mode checked above by hand (the fused kernel's float32 lr within 1e-9).
template <class Opt>
std::vector<double> run_captured(Opt& opt, at::Tensor& p) {
  opt.set_graph_capture(true);
  for (size_t s = 0; s < kGrads.size(); ++s) {
    if (s == 2) opt.param_groups()[0].options().set_lr(opt.param_groups()[0].options().get_lr() / 2);
    opt.refresh_graph_scalars();
    p.mutable_grad() = torch::tensor({kGrads[s][0], kGrads[s][1]}, at::kDouble);
    opt.step();
  }
  return {p[0].item<double>(), p[1].item<double>()};
}

TEST(GraphCaptureModeTest, StepsEqualTheHostScalarSteps) {
  for (bool flag : {false, true}) {
    SCOPED_TRACE(flag ? "nesterov / amsgrad" : "plain");
    const auto sgdw = optim::DecoupledSGDWOptions(0.1).momentum(0.9).weight_decay(1e-4).nesterov(flag);
    at::Tensor p = torch::tensor({1.0, -2.0}, at::kDouble).requires_grad_();
    at::Tensor q = p.detach().clone().requires_grad_();
    optim::DecoupledSGDW host({p}, sgdw), captured({q}, sgdw);
    const auto want = run(host, p), got = run_captured(captured, q);
    EXPECT_NEAR(got[0], want[0], 1e-14);
    EXPECT_NEAR(got[1], want[1], 1e-14);

    const auto adamw = optim::DecoupledAdamWOptions(1e-2).weight_decay(1e-4).amsgrad(flag);
    at::Tensor a = torch::tensor({1.0, -2.0}, at::kDouble).requires_grad_();
    at::Tensor b = a.detach().clone().requires_grad_();
    optim::DecoupledAdamW host_adam({a}, adamw), captured_adam({b}, adamw);
    const auto want_adam = run(host_adam, a), got_adam = run_captured(captured_adam, b);
    EXPECT_NEAR(got_adam[0], want_adam[0], 1e-9);
    EXPECT_NEAR(got_adam[1], want_adam[1], 1e-9);
    ASSERT_GT(std::abs(got_adam[0] - 1.0), 1e-3) << "the parameter moved";

    // The step count lives on the device now; the checkpoint still says 3, and a host-mode optimizer loaded from it
    // continues as the captured one does.
    const c10::IValue state = captured_adam.state_dict();
    const auto per_param = state.toGenericDict().at("state").toGenericDict();
    EXPECT_DOUBLE_EQ(per_param.begin()->value().toGenericDict().at("step").toTensor().item<double>(), 3.0);
    at::Tensor c = b.detach().clone().requires_grad_();
    optim::DecoupledAdamW resumed({c}, adamw);
    resumed.load_state_dict(torch::pickle_load(torch::pickle_save(state)));
    for (auto* t : {&b, &c}) t->mutable_grad() = torch::tensor({-0.2, 0.3}, at::kDouble);
    captured_adam.refresh_graph_scalars();
    captured_adam.step();
    resumed.step();
    EXPECT_NEAR(b[0].item<double>(), c[0].item<double>(), 1e-9);
    EXPECT_NEAR(b[1].item<double>(), c[1].item<double>(), 1e-9);
  }
}

TEST(GraphCaptureModeTest, WhatCannotBeCapturedIsNamed) {
  at::Tensor f32 = at::zeros({2}).requires_grad_();
  at::Tensor f64 = at::zeros({2}, at::kDouble).requires_grad_();
  optim::DecoupledAdamW mixed({f32, f64});
  try {
    mixed.set_graph_capture(true);
    FAIL() << "a group of two dtypes cannot go through one fused kernel";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("DecoupledAdamW: param group 0 mixes devices or dtypes"), std::string::npos)
        << e.what();
  }
  optim::DecoupledSGDW sgdw({f32, f64});
  sgdw.set_graph_capture(true);  // one device: the foreach kernels take both dtypes
  torch::optim::SGD libtorch({f32}, torch::optim::SGDOptions(0.1));
  EXPECT_FALSE(optim::supports_graph_capture(libtorch));
  EXPECT_TRUE(optim::supports_graph_capture(sgdw));
}

TEST(DecoupledAdamWTest, DefaultsAreComposers) {
  optim::DecoupledAdamWOptions o;
  EXPECT_DOUBLE_EQ(o.lr(), 1e-3);
  EXPECT_DOUBLE_EQ(std::get<0>(o.betas()), 0.9);
  EXPECT_DOUBLE_EQ(std::get<1>(o.betas()), 0.95);
  EXPECT_DOUBLE_EQ(o.eps(), 1e-8);
  EXPECT_DOUBLE_EQ(o.weight_decay(), 1e-5);
  EXPECT_FALSE(o.amsgrad());
}

TEST(DecoupledAdamWTest, StateDictRoundTripContinuesIdentically) {
  at::Tensor a = torch::tensor({1.0, -2.0}, at::kDouble).requires_grad_();
  at::Tensor b = a.detach().clone().requires_grad_();
  optim::DecoupledAdamW oa({a}, optim::DecoupledAdamWOptions(1e-2));
  optim::DecoupledAdamW ob({b}, optim::DecoupledAdamWOptions(3.0));
  a.mutable_grad() = torch::tensor({0.5, 0.1}, at::kDouble);
  oa.step();
  {
    at::NoGradGuard g;
    b.copy_(a);
  }
  ob.load_state_dict(torch::pickle_load(torch::pickle_save(oa.state_dict())));
  for (auto* p : {&a, &b}) p->mutable_grad() = torch::tensor({-0.2, 0.3}, at::kDouble);
  oa.step();
  ob.step();
  EXPECT_TRUE(torch::equal(a, b));
}

TEST(DecoupledAdamWTest, LoadRejectsMismatchedGroups) {
  at::Tensor a = at::zeros({2}, at::kDouble).requires_grad_();
  at::Tensor b = at::zeros({2}, at::kDouble).requires_grad_();
  optim::DecoupledAdamW one({a});
  optim::DecoupledAdamW two({a, b});
  try {
    two.load_state_dict(one.state_dict());
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("DecoupledAdamW"), std::string::npos);
  }
}

TEST(DecoupledSGDWTest, StateDictIsPythonShaped) {
  at::Tensor p = torch::tensor({1.0}, at::kDouble).requires_grad_();
  optim::DecoupledSGDW opt({p}, optim::DecoupledSGDWOptions(0.1).momentum(0.5));
  p.mutable_grad() = torch::tensor({1.0}, at::kDouble);
  opt.step();
  const auto d = opt.state_dict().toGenericDict();
  const auto groups = d.at("param_groups").toList();
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_DOUBLE_EQ(groups.get(0).toGenericDict().at("initial_lr").toDouble(), 0.1);
  const auto state = d.at("state").toGenericDict();
  EXPECT_TRUE(state.contains(int64_t{0}));
}

// torch::save / torch::load of our optimizers keep their state (through the base's virtual state), for both
// optimizers and through the base class; an archive not written by one of ours is a clear error.
template <class Opt, class Options>
void expect_archive_round_trip(Options options) {
  at::Tensor a = torch::tensor({1.0, -2.0}, at::kDouble).requires_grad_();
  at::Tensor b = a.detach().clone().requires_grad_();
  Opt oa({a}, options);
  Opt ob({b}, Options(7.0));
  a.mutable_grad() = torch::tensor({0.5, 0.1}, at::kDouble);
  oa.step();
  {
    at::NoGradGuard g;
    b.copy_(a);
  }
  std::stringstream buffer;
  torch::save(oa, buffer);
  optim::Optimizer& base = ob;
  torch::load(base, buffer);
  EXPECT_EQ(ob.initial_lrs(), oa.initial_lrs());
  for (auto* p : {&a, &b}) p->mutable_grad() = torch::tensor({-0.2, 0.3}, at::kDouble);
  oa.step();
  ob.step();
  EXPECT_TRUE(torch::equal(a, b)) << a << b;
}

TEST(OptimizerBaseTest, TorchSaveAndLoadKeepTheState) {
  expect_archive_round_trip<optim::DecoupledSGDW>(optim::DecoupledSGDWOptions(0.1).momentum(0.9));
  expect_archive_round_trip<optim::DecoupledAdamW>(optim::DecoupledAdamWOptions(1e-2));
}

TEST(OptimizerBaseTest, ForeignArchiveIsAClearError) {
  at::Tensor p = at::zeros({2}, at::kDouble).requires_grad_();
  torch::optim::SGD sgd({p}, torch::optim::SGDOptions(0.1));
  std::stringstream buffer;
  torch::save(sgd, buffer);
  optim::DecoupledSGDW ours({p});
  try {
    torch::load(ours, buffer);
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("not saved from a composer::optim optimizer"), std::string::npos) << e.what();
  }
}

// The free functions work on any torch optimizer: ours through the virtuals, LibTorch's through its archive.
TEST(OptimizerBaseTest, FreeFunctionsCoverLibTorchOptimizers) {
  at::Tensor p = torch::tensor({1.0, 2.0}, at::kDouble).requires_grad_();
  torch::optim::SGD sgd({p}, torch::optim::SGDOptions(0.25).momentum(0.9));
  EXPECT_EQ(optim::initial_lrs(sgd), std::vector<double>{0.25});
  p.mutable_grad() = torch::tensor({1.0, 1.0}, at::kDouble);
  sgd.step();
  const c10::IValue saved = optim::optimizer_state_dict(sgd);
  at::Tensor q = p.detach().clone().requires_grad_();
  torch::optim::SGD other({q}, torch::optim::SGDOptions(0.25).momentum(0.9));
  optim::load_optimizer_state_dict(other, saved);
  for (auto* t : {&p, &q}) t->mutable_grad() = torch::tensor({0.5, -1.0}, at::kDouble);
  sgd.step();
  other.step();
  EXPECT_TRUE(torch::equal(p, q)) << "equal weights and restored momentum give equal steps";
  optim::DecoupledSGDW ours({p}, optim::DecoupledSGDWOptions(0.5));
  EXPECT_EQ(optim::initial_lrs(ours), std::vector<double>{0.5});
  optim::erase_param_state(sgd, p);
  EXPECT_TRUE(sgd.state().empty());
}

}  // namespace
}  // namespace composer
