#include "algorithms/algo_support.h"

#include <gtest/gtest.h>

using namespace composer;
using composer::testing::tiny_convnet;

namespace {

// Doubles its input: a replacement whose effect on forward() is easy to see.
struct Doubler : nn::Layer {
  at::Tensor forward(const at::Tensor& x) override { return x * 2; }
};

ReplacementPolicy relu_to_doubler() {
  return policy_for<nn::ReLU>(
      [](nn::ReLU&, int64_t) -> std::shared_ptr<nn::Layer> { return std::make_shared<Doubler>(); });
}

// A parent that calls a composer layer through a typed member: not surgery-ready.
struct TypedParent : torch::nn::Module {
  TypedParent() { relu = register_module("relu", std::make_shared<nn::ReLU>()); }
  std::shared_ptr<nn::ReLU> relu;
};

}  // namespace

TEST(SurgeryTest, ReplacementRunsInForward) {
  auto net = tiny_convnet();
  net->eval();
  const at::Tensor x = torch::randn({2, 3, 16, 16});
  const at::Tensor before = net->forward(x);
  const auto done = replace_module_classes(*net, {relu_to_doubler()});
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[0].path, "2");
  EXPECT_EQ(done[1].path, "5");
  EXPECT_EQ(count_module_instances<nn::ReLU>(*net), 0);
  EXPECT_EQ(count_module_instances<Doubler>(*net), 2);
  // Recompute by hand with the doubling in place of ReLU.
  at::Tensor y = x;
  for (const auto& name : net->child_names()) y = net->child(name).forward(y);
  EXPECT_TRUE(torch::allclose(net->forward(x), y));
  EXPECT_FALSE(torch::allclose(net->forward(x), before));
}

TEST(SurgeryTest, IndexCountsMatchesPerPolicyAndNullKeepsTheOld) {
  auto net = tiny_convnet();
  std::vector<int64_t> seen;
  auto policy = policy_for<nn::Conv2d>([&](nn::Conv2d&, int64_t i) -> std::shared_ptr<nn::Layer> {
    seen.push_back(i);
    return nullptr;
  });
  EXPECT_TRUE(replace_module_classes(*net, {policy}).empty());
  EXPECT_EQ(seen, (std::vector<int64_t>{0, 1, 2, 3, 4}));  // 2 stem convs + 3 in the bottleneck, pre-order
}

TEST(SurgeryTest, ModuleInSeveralSlotsIsReplacedInAll) {
  auto shared = std::make_shared<nn::ReLU>();
  auto seq = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Layer>>{shared, shared});
  const auto done = replace_module_classes(*seq, {relu_to_doubler()});
  ASSERT_EQ(done.size(), 1u);
  EXPECT_TRUE(torch::equal(seq->forward(torch::ones({2})), torch::full({2}, 4.0)));
}

TEST(SurgeryTest, ParentThatIsNotCompositeIsAnErrorNamingTheModule) {
  auto root = std::make_shared<nn::Sequential>();
  auto typed = std::make_shared<TypedParent>();
  struct Wrapper : nn::Layer {
    explicit Wrapper(std::shared_ptr<TypedParent> p) { register_module("block", p); }
    at::Tensor forward(const at::Tensor& x) override { return x; }
  };
  root->push_back(std::make_shared<Wrapper>(typed));
  try {
    replace_module_classes(*root, {relu_to_doubler()});
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'0.block.relu'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("not a composer::nn::Composite"), std::string::npos) << e.what();
  }
  EXPECT_EQ(count_module_instances<nn::ReLU>(*root), 1);  // nothing changed
}

TEST(SurgeryTest, LibTorchLayersAreAnErrorNotASilentNoOp) {
  torch::nn::Sequential plain(torch::nn::Conv2d(torch::nn::Conv2dOptions(16, 16, 3).stride(2)), torch::nn::ReLU());
  try {
    functional::apply_blurpool(*plain.ptr());
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'0' is LibTorch's Conv2d"), std::string::npos) << e.what();
  }
}

TEST(SurgeryTest, OptimizerLosesOldParametersAndStateAndGainsNewOnes) {
  auto net = tiny_convnet();
  auto opt = std::make_shared<optim::DecoupledSGDW>(net->parameters(), optim::DecoupledSGDWOptions(0.1).momentum(0.9));
  for (auto& p : net->parameters()) p.mutable_grad() = torch::ones_like(p);
  opt->step();  // creates momentum buffers
  const auto old_params = net->parameters();
  functional::FactorizeOptions fo;
  fo.min_channels(4).latent_channels(2).min_features(8).latent_features(2);
  const auto done = functional::apply_factorization(*net, fo, opt.get());
  ASSERT_FALSE(done.empty());
  const auto now = net->parameters();
  const auto& in_opt = opt->param_groups().at(0).params();
  ASSERT_EQ(in_opt.size(), now.size());
  for (const auto& p : now) {
    EXPECT_TRUE(std::any_of(in_opt.begin(), in_opt.end(), [&](const at::Tensor& q) { return q.is_same(p); }));
  }
  const auto sd = opt->state_dict().toGenericDict().at("state").toGenericDict();
  EXPECT_LT(static_cast<size_t>(sd.size()), now.size());  // new parameters have no momentum yet
  for (auto& p : net->parameters()) p.mutable_grad() = torch::ones_like(p);
  EXPECT_NO_THROW(opt->step());
}

TEST(SurgeryTest, UpdateParamsRejectsParametersSpanningGroups) {
  auto a = torch::zeros({2}, torch::requires_grad()), b = torch::zeros({2}, torch::requires_grad());
  std::vector<torch::optim::OptimizerParamGroup> groups{torch::optim::OptimizerParamGroup({a}),
                                                        torch::optim::OptimizerParamGroup({b})};
  optim::DecoupledSGDW opt(groups, optim::DecoupledSGDWOptions(0.1));
  EXPECT_THROW(update_params_in_optimizer({a, b}, {torch::zeros({2})}, opt), std::invalid_argument);
  EXPECT_THROW(update_params_in_optimizer({torch::zeros({1})}, {}, opt), std::invalid_argument);
}

TEST(SurgeryTest, NewLayersFollowTheOldDtype) {
  auto net = tiny_convnet();
  net->to(at::kDouble);
  functional::apply_blurpool(*net);
  for (const auto& b : net->buffers()) {
    if (b.is_floating_point()) {
      EXPECT_EQ(b.scalar_type(), at::kDouble);
    }
  }
  EXPECT_NO_THROW(net->forward(torch::randn({2, 3, 16, 16}, at::kDouble)));
}
