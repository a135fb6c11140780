// The math of the algorithms that change the model: BlurPool, ChannelsLast, Factorize, GhostBatchNorm,
// SqueezeExcite, StochasticDepth, WeightStandardization.
#include "algorithms/algo_support.h"

#include <gtest/gtest.h>

using namespace composer;
using composer::testing::tiny_convnet;

TEST(BlurPoolTest, FilterOnAnImpulseIsTheBinomialKernel) {
  at::Tensor x = torch::zeros({1, 2, 5, 5});
  x[0][0][2][2] = 16;
  x[0][1][2][2] = 32;
  const at::Tensor y = functional::blur_2d(x);
  const at::Tensor k = torch::tensor({{1., 2., 1.}, {2., 4., 2.}, {1., 2., 1.}}).to(at::kFloat);
  EXPECT_TRUE(torch::allclose(y[0][0].slice(0, 1, 4).slice(1, 1, 4), k));
  EXPECT_TRUE(torch::allclose(y[0][1].slice(0, 1, 4).slice(1, 1, 4), k * 2));
  EXPECT_EQ(y[0][0].sum().item<double>(), 16.0);
  EXPECT_EQ(functional::blur_2d(torch::ones({1, 1, 8, 8}), 2).sizes(), (std::vector<int64_t>{1, 1, 4, 4}));
}

TEST(BlurPoolTest, ReplacesStridedWideConvsAndMaxPoolsOnly) {
  auto net = tiny_convnet();
  net->eval();
  const at::Tensor x = torch::randn({2, 3, 16, 16});
  const auto shape = net->forward(x).sizes().vec();
  const auto done = functional::apply_blurpool(*net);
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[0].path, "3");  // the stride-2 conv with 16 input channels; the stem has 3
  EXPECT_EQ(done[1].path, "7");
  EXPECT_EQ(count_module_instances<nn::BlurConv2d>(*net), 1);
  EXPECT_EQ(count_module_instances<nn::BlurMaxPool2d>(*net), 1);
  EXPECT_EQ(net->forward(x).sizes().vec(), shape);
  EXPECT_TRUE(functional::apply_blurpool(*net).empty() || count_module_instances<nn::BlurConv2d>(*net) == 1);
  auto wide = tiny_convnet();
  functional::apply_blurpool(*wide, functional::BlurPoolOptions().min_channels(17).blur_first(false));
  EXPECT_EQ(count_module_instances<nn::BlurConv2d>(*wide), 0);
  auto late = tiny_convnet();
  functional::apply_blurpool(*late, functional::BlurPoolOptions().blur_first(false).replace_maxpools(false));
  auto* blur = dynamic_cast<nn::BlurConv2d*>(late->child_ptr("3").get());
  ASSERT_NE(blur, nullptr);
  EXPECT_EQ(dynamic_cast<nn::Conv2d&>(blur->child("conv")).stride, 1);
  EXPECT_EQ(blur->blur_stride, 2);
  // The blurred conv equals blur then the original strided conv.
  auto orig = tiny_convnet();
  auto& conv = dynamic_cast<nn::Conv2d&>(orig->child("3"));
  const at::Tensor h = torch::randn({1, 16, 8, 8});
  auto fresh = tiny_convnet();
  functional::apply_blurpool(*fresh);
  EXPECT_TRUE(torch::allclose(fresh->child("3").forward(h), conv.forward(functional::blur_2d(h)), 1e-5, 1e-6));
}

TEST(ChannelsLastTest, ParametersAndActivationsAreChannelsLast) {
  auto net = tiny_convnet();
  std::vector<at::Tensor> before = net->parameters();
  functional::apply_channels_last(*net);
  const auto after = net->parameters();
  for (size_t i = 0; i < after.size(); ++i) {
    EXPECT_TRUE(after[i].is_same(before[i]));
    if (after[i].dim() == 4) {
      EXPECT_TRUE(after[i].is_contiguous(at::MemoryFormat::ChannelsLast));
    }
  }
  const at::Tensor act = net->child("0").forward(torch::randn({2, 3, 16, 16}));
  EXPECT_TRUE(act.is_contiguous(at::MemoryFormat::ChannelsLast));
  EXPECT_FALSE(act.is_contiguous());
}

// A one-input-channel convolution (a grayscale image's first layer): its NCHW weight strides count as contiguous in
// both formats, and torch's Module.to(memory_format=channels_last) still restrides it, so that the convolution's
// output, and every layer up to the next convolution, runs channels-last (bench/results/step_profile.md).
TEST(ChannelsLastTest, OneChannelConvolutionsAreRestridedAsTorchDoes) {
  auto seq = std::make_shared<nn::Sequential>();
  seq->push_back(std::make_shared<nn::Conv2d>(nn::Conv2dOptions(1, 8, 3).padding(1)));
  functional::apply_channels_last(*seq);
  const at::Tensor weight = seq->parameters().front();
  EXPECT_EQ(weight.sizes(), at::IntArrayRef({8, 1, 3, 3}));
  EXPECT_EQ(weight.suggest_memory_format(), at::MemoryFormat::ChannelsLast);
  EXPECT_EQ(weight.strides(), at::IntArrayRef({9, 1, 3, 1}));  // torch: [9, 1, 3, 1]
  const at::Tensor act = seq->forward(torch::randn({2, 1, 16, 16}));
  EXPECT_TRUE(act.is_contiguous(at::MemoryFormat::ChannelsLast));
  EXPECT_FALSE(act.is_contiguous());
}

TEST(FactorizeTest, RanksAndShapes) {
  EXPECT_EQ(functional::factorized_rank(0.25, 512, 256), 64);
  EXPECT_EQ(functional::factorized_rank(128, 512, 256), 128);
  EXPECT_EQ(functional::factorized_rank(0.001, 100, 100), 1);
  EXPECT_EQ(functional::max_rank_with_speedup(256, 256), 127);     // 256*256/512 = 128 -> 127
  EXPECT_EQ(functional::max_rank_with_speedup(512, 512, 9), 460);  // ceil(4608 * 512 / 5120 - 1)
  auto seq = std::make_shared<nn::Sequential>();
  seq->push_back(std::make_shared<nn::Conv2d>(nn::Conv2dOptions(512, 512, 3).padding(1)));
  seq->push_back(std::make_shared<nn::Flatten>());
  seq->push_back(std::make_shared<nn::Linear>(512 * 4, 512));
  seq->push_back(std::make_shared<nn::Linear>(512, 256));  // max rank ceil(512 * 256 / 768 - 1) = 170 >= 128
  const auto done = functional::apply_factorization(*seq);
  ASSERT_EQ(done.size(), 3u);
  auto* fc = dynamic_cast<nn::FactorizedConv2d*>(seq->child_ptr("0").get());
  ASSERT_NE(fc, nullptr);
  EXPECT_EQ(dynamic_cast<nn::Conv2d&>(fc->child("conv0")).weight.sizes(), (std::vector<int64_t>{128, 512, 3, 3}));
  EXPECT_EQ(dynamic_cast<nn::Conv2d&>(fc->child("conv1")).weight.sizes(), (std::vector<int64_t>{512, 128, 1, 1}));
  EXPECT_FALSE(dynamic_cast<nn::Conv2d&>(fc->child("conv0")).bias.defined());
  auto* fl = dynamic_cast<nn::FactorizedLinear*>(seq->child_ptr("2").get());
  ASSERT_NE(fl, nullptr);
  EXPECT_EQ(fl->latent_features, 128);
  EXPECT_EQ(seq->forward(torch::randn({1, 512, 2, 2})).sizes(), (std::vector<int64_t>{1, 256}));
  auto small = std::make_shared<nn::Sequential>();
  small->push_back(std::make_shared<nn::Linear>(256, 256));  // rank 128 would save nothing (max 127)
  EXPECT_TRUE(functional::apply_factorization(*small).empty());
}

TEST(GhostBatchNormTest, EachGhostBatchIsNormalizedWithItsOwnStatistics) {
  torch::manual_seed(4);
  auto bn = std::make_shared<nn::BatchNorm2d>(3);
  nn::GhostBatchNorm2d ghost(bn, 4);
  at::Tensor x = torch::randn({12, 3, 5, 5});
  x.slice(0, 4, 8) += 10;  // a shifted middle ghost batch
  const at::Tensor y = ghost.forward(x);
  for (int64_t g = 0; g < 3; ++g) {
    const at::Tensor chunk = y.slice(0, 4 * g, 4 * g + 4);
    EXPECT_TRUE(torch::allclose(chunk.mean({0, 2, 3}), torch::zeros({3}), 1e-4, 1e-4));
    EXPECT_TRUE(torch::allclose(chunk.var({0, 2, 3}, false), torch::ones({3}), 1e-3, 1e-3));
  }
  // Running mean: three updates with momentum 0.1 / 3.
  at::Tensor expected = torch::zeros({3});
  for (int64_t g = 0; g < 3; ++g)
    expected = expected * (1 - 0.1 / 3) + x.slice(0, 4 * g, 4 * g + 4).mean({0, 2, 3}) * (0.1 / 3);
  EXPECT_TRUE(torch::allclose(bn->running_mean, expected, 1e-5, 1e-5));
  EXPECT_DOUBLE_EQ(bn->momentum, 0.1);
  EXPECT_THROW(ghost.forward(torch::randn({3, 3, 5, 5})), std::invalid_argument);
  ghost.eval();
  EXPECT_NO_THROW(ghost.forward(torch::randn({3, 3, 5, 5})));
  auto net = tiny_convnet();
  EXPECT_EQ(functional::apply_ghost_batchnorm(*net, 8).size(), 5u);
  EXPECT_EQ(count_module_instances<nn::GhostBatchNorm2d>(*net), 5);
}

TEST(SqueezeExciteTest, AddsABlockAfterWideConvsWithComposerNames) {
  auto net = tiny_convnet();
  const auto done =
      functional::apply_squeeze_excite(*net, functional::SqueezeExciteOptions().min_channels(16).latent_channels(0.25));
  ASSERT_EQ(done.size(), 1u);  // only the 16 -> 16 stem conv; the bottleneck's convs have 4 channels on one side
  const auto names = net->named_parameters().keys();
  EXPECT_NE(std::find(names.begin(), names.end(), "3.se.pool_and_mlp.2.weight"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "3.conv.weight"), names.end());
  nn::SqueezeExcite2d se(8, 2);
  const at::Tensor x = torch::randn({2, 8, 4, 4});
  const at::Tensor y = se.forward(x);
  const at::Tensor scale = y / x;  // one coefficient in (0, 1) per sample and channel
  EXPECT_TRUE(torch::allclose(scale.amax({2, 3}), scale.amin({2, 3}), 1e-4, 1e-5));
  EXPECT_TRUE(torch::all(scale > 0).item<bool>() && torch::all(scale < 1).item<bool>());
}

TEST(StochasticDepthTest, LinearRatesAndSampleDropRate) {
  EXPECT_DOUBLE_EQ(functional::stochastic_depth_rate(0, 4, 0.2, functional::DropDistribution::LINEAR), 0.05);
  EXPECT_DOUBLE_EQ(functional::stochastic_depth_rate(3, 4, 0.2, functional::DropDistribution::LINEAR), 0.2);
  EXPECT_DOUBLE_EQ(functional::stochastic_depth_rate(0, 4, 0.2, functional::DropDistribution::UNIFORM), 0.2);
  torch::manual_seed(5);
  const at::Tensor kept = functional::sample_drop(torch::ones({20000, 2}), 0.3, true);
  EXPECT_NEAR((kept.select(1, 0) == 0).to(at::kFloat).mean().item<double>(), 0.3, 0.02);
  EXPECT_TRUE(torch::equal(kept.select(1, 0), kept.select(1, 1)));  // whole samples
  EXPECT_TRUE(torch::allclose(functional::sample_drop(torch::ones({3}), 0.3, false), torch::full({3}, 0.7)));
}

TEST(StochasticDepthTest, BlocksKeepTheirLayersAndDropTheBranch) {
  auto net = models::resnet(50, 10);
  const auto done = functional::apply_stochastic_depth(*net, "ResNetBottleneck", functional::StochasticMethod::BLOCK,
                                                       1.0, functional::DropDistribution::UNIFORM);
  ASSERT_EQ(done.size(), 16u);
  EXPECT_EQ(count_module_instances<models::ResNetBottleneck>(*net), 0);
  const auto names = net->named_parameters().keys();
  EXPECT_NE(std::find(names.begin(), names.end(), "layer1.1.conv2.weight"), names.end());
  // Rate 1 while training: an identity block returns its input.
  auto& block = dynamic_cast<nn::StochasticBlock&>(*done[1].new_module);
  const at::Tensor x = torch::randn({1, 256, 4, 4});
  EXPECT_TRUE(torch::equal(block.forward(x), x));
  block.eval();  // eval: branch scaled by 1 - rate = 0
  EXPECT_TRUE(torch::allclose(block.forward(x), at::relu(x)));
  EXPECT_THROW(functional::apply_stochastic_depth(*net, "Bottleneck"), std::invalid_argument);
}

TEST(WeightStandardizationTest, WeightsHaveZeroMeanUnitVarianceAndLastConvsAreSkipped) {
  torch::manual_seed(6);
  const at::Tensor w = torch::randn({8, 4, 3, 3}) * 3 + 1;
  const at::Tensor s = functional::standardize_weights(w);
  EXPECT_TRUE(torch::allclose(s.mean({1, 2, 3}), torch::zeros({8}), 1e-5, 1e-5));
  EXPECT_TRUE(torch::allclose(s.var({1, 2, 3}, false), torch::ones({8}), 1e-4, 1e-4));
  auto net = tiny_convnet();
  const auto done = functional::apply_weight_standardization(*net, 2);
  EXPECT_EQ(done.size(), 3u);  // 5 convs, the last 2 kept
  EXPECT_EQ(count_module_instances<nn::StandardizedConv2d>(*net), 3);
  auto& conv = dynamic_cast<nn::StandardizedConv2d&>(net->child("0"));
  const at::Tensor x = torch::randn({1, 3, 8, 8});
  EXPECT_TRUE(torch::allclose(conv.forward(x), at::conv2d(x, functional::standardize_weights(conv.weight), {}, 1, 1),
                              1e-5, 1e-5));
}

TEST(StochasticDepthTest, SampleMethodDropsWholeSamplesOfTheBranch) {
  torch::manual_seed(8);
  models::ResNetBottleneck original(16, 4, 1);
  nn::StochasticBlock block(original, nn::StochasticBlock::Kind::BOTTLENECK, functional::StochasticMethod::SAMPLE, 1.0);
  const at::Tensor x = torch::randn({4, 16, 5, 5});
  EXPECT_TRUE(torch::allclose(block.forward(x), at::relu(x)));  // every branch dropped: relu(0 + x)
  nn::StochasticBlock keep(original, nn::StochasticBlock::Kind::BOTTLENECK, functional::StochasticMethod::SAMPLE, 0.0);
  EXPECT_TRUE(torch::allclose(keep.forward(x), original.forward(x)));
}

TEST(FactorizeTest, SetRankKeepsOutputsWhenTheMapAlreadyHasThatRank) {
  torch::manual_seed(10);
  nn::FactorizedLinear fl(nn::Linear(32, 24), 8);
  {  // make the current map W = W1 W0 rank 3
    torch::NoGradGuard no_grad;
    dynamic_cast<nn::Linear&>(fl.child("module0")).weight.narrow(0, 3, 5).zero_();
  }
  const at::Tensor x = torch::randn({64, 32});
  const at::Tensor before = fl.forward(x);
  auto opt = std::make_shared<optim::DecoupledSGDW>(fl.parameters(), optim::DecoupledSGDWOptions(0.1));
  fl.set_rank(x, 3, opt.get());
  EXPECT_EQ(fl.latent_features, 3);
  EXPECT_EQ(dynamic_cast<nn::Linear&>(fl.child("module0")).weight.sizes(), (std::vector<int64_t>{3, 32}));
  EXPECT_TRUE(torch::allclose(fl.forward(x), before, 1e-4, 1e-4));
  EXPECT_EQ(opt->param_groups()[0].params().size(), fl.parameters().size());
  EXPECT_THROW(fl.set_rank(x, 4), std::invalid_argument);  // above the current rank
  EXPECT_THROW(fl.set_rank(x, 0), std::invalid_argument);

  nn::FactorizedConv2d fc(nn::Conv2d(nn::Conv2dOptions(8, 16, 3).stride(2).padding(1)), 8);
  const at::Tensor img = torch::randn({4, 8, 10, 10});
  const at::Tensor full = fc.forward(img);
  double previous = 0;
  for (int64_t r : {6, 4, 2}) {  // lower ranks reproduce the outputs less well
    nn::FactorizedConv2d copy(nn::Conv2d(nn::Conv2dOptions(8, 16, 3).stride(2).padding(1)), 8);
    {
      torch::NoGradGuard no_grad;
      auto source = fc.named_parameters();
      for (auto& p : copy.named_parameters()) p.value().copy_(source[p.key()]);
    }
    copy.set_rank(img, r);
    ASSERT_EQ(copy.forward(img).sizes(), full.sizes());
    const double err = (copy.forward(img) - full).pow(2).sum().item<double>();
    EXPECT_GT(err, previous) << r;
    previous = err;
  }
}

namespace composer {
namespace {

std::vector<at::Tensor> params_with_grads(double scale) {
  torch::manual_seed(4);
  std::vector<at::Tensor> params{torch::randn({3, 4}, torch::requires_grad()),
                                 torch::randn({3}, torch::requires_grad())};
  for (auto& p : params) p.mutable_grad() = torch::randn(p.sizes()) * scale;
  return params;
}

double total_norm(const std::vector<at::Tensor>& params) {
  double sq = 0;
  for (const auto& p : params) sq += p.grad().pow(2).sum().item<double>();
  return std::sqrt(sq);
}

TEST(GradientClippingTest, NormValueAndAdaptiveBoundTheGradients) {
  auto norm = params_with_grads(10);
  functional::apply_gradient_clipping(norm, functional::ClippingType::NORM, 0.5);
  EXPECT_NEAR(total_norm(norm), 0.5, 1e-5);  // threshold / (norm + 1e-6) * norm
  auto small = params_with_grads(1e-3);
  const auto before = small[0].grad().clone();
  functional::apply_gradient_clipping(small, functional::ClippingType::NORM, 0.5);
  EXPECT_TRUE(torch::equal(small[0].grad(), before));  // under the threshold: untouched
  auto value = params_with_grads(10);
  functional::apply_gradient_clipping(value, functional::ClippingType::VALUE, 0.25);
  for (const auto& p : value) EXPECT_LE(p.grad().abs().max().item<double>(), 0.25);
  auto adaptive = params_with_grads(10);
  functional::apply_gradient_clipping(adaptive, functional::ClippingType::ADAPTIVE, 0.01);
  // Each row of the weight: |g_row| <= 0.01 |w_row|.
  const auto g_rows = adaptive[0].grad().norm(2, {1}), w_rows = adaptive[0].detach().norm(2, {1});
  EXPECT_TRUE((g_rows <= w_rows * 0.01 * (1 + 1e-6)).all().item<bool>());
}

TEST(GradientClippingTest, BadArgumentsAreNamed) {
  auto expect_error = [](const std::function<void()>& f, const std::string& expected) {
    try {
      f();
      FAIL() << "expected: " << expected;
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()), expected);
    }
  };
  expect_error(
      [] {
        algorithms::make_algorithm("gradient_clipping", {{"clipping_type", "norm"}});
      },
      "gradient_clipping.clipping_threshold: required (the largest total norm (norm), magnitude (value) or "
      "gradient/weight norm ratio (adaptive))");
  expect_error(
      [] {
        algorithms::make_algorithm("gradient_clipping", {{"clipping_type", "l2"}, {"clipping_threshold", "1"}});
      },
      "gradient_clipping.clipping_type: expected one of adaptive, norm, value, got 'l2'");
  expect_error(
      [] {
        algorithms::make_algorithm("gradient_clipping", {{"clipping_type", "norm"}, {"clipping_threshold", "-1"}});
      },
      "GradientClipping.clipping_threshold must be > 0, got -1.0");
  expect_error([] { algorithms::GradientClipping(algorithms::GradientClippingOptions().clipping_threshold(1.0)); },
               "GradientClipping: clipping_type is required ('adaptive', 'norm' or 'value')");
  auto params = params_with_grads(1);
  expect_error([&] { functional::apply_gradient_clipping(params, functional::ClippingType::VALUE, 0); },
               "apply_gradient_clipping: clipping_threshold must be > 0, got 0.0");
}

}  // namespace
}  // namespace composer
