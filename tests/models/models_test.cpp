#include "support/test_support.h"

#include <gtest/gtest.h>

namespace composer {
namespace {

// One SGD step on a batch changes the loss (the graph is connected) and yields finite values.
void one_training_step(ComposerModel& model, const Batch& batch) {
  torch::optim::SGD opt(model.parameters(), torch::optim::SGDOptions(0.01));
  model.train();
  opt.zero_grad();
  const at::Tensor loss = model.loss(model.forward(batch), batch);
  ASSERT_TRUE(std::isfinite(loss.item<double>()));
  loss.backward();
  for (const auto& p : model.parameters()) ASSERT_TRUE(p.grad().defined()) << "a parameter got no gradient";
  opt.step();
}

TEST(VisionModelsTest, ShapesAndOneStep) {
  struct Case {
    std::string name;
    std::shared_ptr<nn::Layer> net;
    std::vector<int64_t> input;
    int64_t classes;
  };
  std::vector<Case> cases{
      {"mlp", models::mlp(784, {32}, 10), {4, 1, 28, 28}, 10},
      {"mnist_cnn", models::mnist_cnn(1, 10, 8), {4, 1, 28, 28}, 10},
      {"resnet20", models::cifar_resnet(20, 10, 3), {2, 3, 32, 32}, 10},
      {"resnet56", models::cifar_resnet(56, 10, 1), {2, 1, 28, 28}, 10},
      {"resnet18", models::resnet(18, 7), {2, 3, 64, 64}, 7},
      {"resnet50", models::resnet(50, 5), {2, 3, 64, 64}, 5},
  };
  for (auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto model = ComposerClassifier::wrap(c.net);
    const Batch batch(at::randn(c.input), at::randint(c.classes, {c.input[0]}, at::TensorOptions().dtype(at::kLong)));
    EXPECT_EQ(model->forward(batch).sizes(), (std::vector<int64_t>{c.input[0], c.classes}));
    one_training_step(*model, batch);
  }
}

TEST(VisionModelsTest, TorchvisionParameterNames) {
  auto r = models::resnet(50, 10);
  const auto params = r->named_parameters();
  for (const char* key : {"conv1.weight", "bn1.weight", "layer1.0.conv1.weight", "layer1.0.downsample.0.weight",
                          "layer1.0.downsample.1.bias", "layer4.2.bn3.weight", "fc.weight", "fc.bias"}) {
    EXPECT_TRUE(params.contains(key)) << key;
  }
  EXPECT_TRUE(r->named_buffers().contains("layer2.1.bn2.running_var"));
  int64_t n = 0;
  for (const auto& p : r->parameters()) n += p.numel();
  EXPECT_EQ(n, 23528522);  // torchvision resnet50(num_classes=10)
}

TEST(LanguageModelsTest, GptAndBertShapesAndOneStep) {
  const auto cfg = models::TransformerConfig().vocab_size(37).max_seq_len(16).n_layer(2).n_head(2).d_model(16);
  const at::Tensor ids = at::randint(37, {3, 16}, at::TensorOptions().dtype(at::kLong));
  for (bool bert : {false, true}) {
    SCOPED_TRACE(bert ? "bert" : "gpt");
    std::shared_ptr<nn::Layer> net;
    if (bert) {
      net = std::make_shared<models::BertMLM>(cfg);
    } else {
      net = std::make_shared<models::GPT>(cfg);
    }
    auto model = std::make_shared<ComposerLanguageModel>(net, bert);
    at::Tensor labels = ids.clone();
    if (bert) labels.masked_fill_(at::rand({3, 16}).gt(0.15), -100);
    const Batch batch({{"input_ids", ids}, {"labels", labels}});
    EXPECT_EQ(model->forward(batch).sizes(), (std::vector<int64_t>{3, 16, 37}));
    one_training_step(*model, batch);
    EXPECT_GT(*model->flops_per_batch(batch), 0.0);
    EXPECT_EQ(model->get_metrics(false).count("LanguagePerplexity"), 1u);
  }
  EXPECT_THROW(models::GPT(models::TransformerConfig().d_model(10).n_head(3)), std::invalid_argument);
}

TEST(LanguageModelsTest, GptIsCausal) {
  auto gpt = std::make_shared<models::GPT>(
      models::TransformerConfig().vocab_size(11).max_seq_len(8).n_layer(1).n_head(1).d_model(8));
  gpt->eval();
  at::Tensor a = at::randint(11, {1, 8}, at::TensorOptions().dtype(at::kLong));
  at::Tensor b = a.clone();
  b[0][7] = (a[0][7].item<int64_t>() + 1) % 11;  // change only the last token
  const at::Tensor la = gpt->forward(a), lb = gpt->forward(b);
  EXPECT_TRUE(at::allclose(la.narrow(1, 0, 7), lb.narrow(1, 0, 7)));
  EXPECT_FALSE(at::allclose(la.narrow(1, 7, 1), lb.narrow(1, 7, 1)));
}

// Generation with a key-value cache: steps of one and several tokens after a prompt give the full forward's logits,
// generate_tokens (which takes the cache) gives the uncached argmax loop's tokens, positions past max_seq_len are an
// error naming it, and a model whose attention Alibi replaced generates through the full forward.
TEST(LanguageModelsTest, GptCachedStepsEqualTheFullForward) {
  at::manual_seed(0);
  auto gpt = std::make_shared<models::GPT>(
      models::TransformerConfig().vocab_size(23).max_seq_len(12).n_layer(2).n_head(2).d_model(16));
  gpt->eval();
  at::NoGradGuard no_grad;
  const at::Tensor ids = at::randint(23, {2, 11}, at::TensorOptions().dtype(at::kLong));
  const at::Tensor full = gpt->forward(ids);
  ASSERT_TRUE(gpt->supports_cache());
  models::KVCache cache;
  std::vector<at::Tensor> parts{gpt->forward_cached(ids.narrow(1, 0, 5), cache),
                                gpt->forward_cached(ids.narrow(1, 5, 3), cache)};
  for (int64_t i = 8; i < 11; ++i) parts.push_back(gpt->forward_cached(ids.narrow(1, i, 1), cache));
  EXPECT_EQ(cache.length(), 11);
  EXPECT_LT((at::cat(parts, 1) - full).abs().max().item<double>(), 1e-5);
  EXPECT_THROW(gpt->forward_cached(ids.narrow(1, 0, 2), cache), std::invalid_argument);  // 13 > max_seq_len 12

  const at::Tensor got =
      models::generate_tokens(*gpt, ids.narrow(1, 0, 4), models::GenerationOptions().max_new_tokens(6));
  at::Tensor want = ids.narrow(1, 0, 4);
  for (int i = 0; i < 6; ++i) want = at::cat({want, gpt->forward(want).select(1, -1).argmax(-1, true)}, 1);
  EXPECT_TRUE(at::equal(got, want));

  functional::apply_alibi(*gpt, 12);
  EXPECT_FALSE(gpt->supports_cache());
  EXPECT_EQ(models::generate_tokens(*gpt, ids.narrow(1, 0, 4), models::GenerationOptions().max_new_tokens(2)).size(1),
            6);
}

// Wrapped blocks (activation checkpointing here; FSDP's units the same way) keep the key-value cache: the model looks
// through the wrappers to its blocks, and generates the uncached argmax loop's tokens.
TEST(LanguageModelsTest, WrappedBlocksKeepTheCache) {
  at::manual_seed(0);
  auto gpt = std::make_shared<models::GPT>(
      models::TransformerConfig().vocab_size(23).max_seq_len(12).n_layer(2).n_head(2).d_model(16));
  gpt->eval();
  at::NoGradGuard no_grad;
  at::Tensor want = at::randint(23, {2, 4}, at::TensorOptions().dtype(at::kLong));
  const at::Tensor prompt = want;
  for (int i = 0; i < 6; ++i) want = at::cat({want, gpt->forward(want).select(1, -1).argmax(-1, true)}, 1);
  const auto blocks = [](const std::string&, const torch::nn::Module& m) {
    return dynamic_cast<const models::GPTBlock*>(&m) != nullptr;
  };
  EXPECT_EQ(nn::apply_activation_checkpointing(*gpt, blocks), 2);
  ASSERT_TRUE(gpt->supports_cache());
  EXPECT_TRUE(at::equal(models::generate_tokens(*gpt, prompt, models::GenerationOptions().max_new_tokens(6)), want));
}

class Zero : public nn::Layer {
 public:
  at::Tensor forward(const at::Tensor& x) override { return at::zeros_like(x); }
};

// Replacing a child changes what forward() runs (LibTorch's replace_module alone would not).
TEST(LayersTest, OptionsNameTheArgumentsAndShapeTheParameters) {
  nn::Conv2d conv(nn::Conv2dOptions(4, 8, 3).stride(2).padding(1).bias(false).groups(2));
  EXPECT_EQ(conv.weight.sizes(), (std::vector<int64_t>{8, 2, 3, 3}));
  EXPECT_FALSE(conv.bias.defined());
  EXPECT_EQ(conv.forward(torch::zeros({1, 4, 8, 8})).sizes(), (std::vector<int64_t>{1, 8, 4, 4}));
  const auto o = conv.options();  // what surgery copies
  EXPECT_EQ(o.stride(), 2);
  EXPECT_EQ(o.padding(), 1);
  EXPECT_FALSE(o.bias());
  EXPECT_EQ(o.groups(), 2);
  EXPECT_TRUE(nn::Conv2d(4, 8, 3).bias.defined());  // PyTorch's defaults: stride 1, no padding, a bias
  try {
    nn::Conv2d bad(nn::Conv2dOptions(3, 8, 3).groups(2));
    FAIL() << "groups 2 accepted for 3 input channels";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "Conv2d: groups 2 must divide in_channels 3 and out_channels 8");
  }
  nn::Linear linear(nn::LinearOptions(5, 3).bias(false));
  EXPECT_EQ(linear.weight.sizes(), (std::vector<int64_t>{3, 5}));
  EXPECT_FALSE(linear.bias.defined());
  EXPECT_TRUE(nn::Linear(5, 3).bias.defined());
}

// nn::max_pool2d against at::max_pool2d: bitwise the same values without autograd, where it takes the strided
// maxima (ties after a ReLU, odd sizes, 3-D input, double and half precision, NaNs), and LibTorch's op under
// autograd and for the shapes it leaves to LibTorch.
TEST(LayersTest, MaxPoolEqualsLibTorchsBitwise) {
  at::manual_seed(3);
  auto same = [](const at::Tensor& a, const at::Tensor& b) {
    return a.sizes() == b.sizes() && a.isnan().equal(b.isnan()) && a.nan_to_num(0).equal(b.nan_to_num(0)) &&
           a.signbit().equal(b.signbit());
  };
  auto check = [&](const at::Tensor& x, int64_t k, int64_t s, int64_t p) {
    SCOPED_TRACE(::testing::Message() << x.sizes() << " " << x.scalar_type() << " k" << k << " s" << s << " p" << p);
    const at::Tensor expected = at::max_pool2d(x, {k, k}, {s, s}, {p, p});
    {
      at::NoGradGuard no_grad;
      EXPECT_TRUE(same(nn::max_pool2d(x, k, s, p), expected));
      EXPECT_TRUE(same(nn::max_pool2d(x.requires_grad_(), k, s, p), expected));
    }
    EXPECT_TRUE(same(nn::max_pool2d(x.detach(), k, s, p), expected));  // nothing to record
    const at::Tensor a = x.detach().clone().requires_grad_(), b = x.detach().clone().requires_grad_();
    const at::Tensor ya = at::max_pool2d(a, {k, k}, {s, s}, {p, p}), yb = nn::max_pool2d(b, k, s, p);
    EXPECT_EQ(yb.grad_fn()->name(), ya.grad_fn()->name());  // under autograd: LibTorch's
    const at::Tensor g = at::randn_like(ya);
    ya.backward(g);
    yb.backward(g);
    EXPECT_TRUE(a.grad().equal(b.grad()));
  };
  check(at::relu(at::randn({8, 4, 28, 28})), 2, 2, 0);  // half the inputs 0: many windows with tied maxima
  check(at::randn({8, 4, 27, 13}), 2, 2, 0);            // the last row and column belong to no window
  check(at::relu(at::randn({4, 10, 10})), 2, 2, 0);     // unbatched
  check(at::randn({2, 3, 8, 8}).to(at::kDouble), 2, 2, 0);
  check(at::randn({2, 3, 8, 8}).to(at::kHalf), 2, 2, 0);
  check(at::randn({2, 3, 8, 8}) * 0, 2, 2, 0);  // signed zeros
  at::Tensor nan = at::randn({2, 3, 8, 8});
  nan.index_put_({0, 0, 0, 1}, std::nan(""));
  nan.index_put_({1, 2, 5, 4}, std::nan(""));
  check(nan, 2, 2, 0);
  check(at::randn({2, 3, 8, 8}).contiguous(at::MemoryFormat::ChannelsLast), 2, 2, 0);  // LibTorch's
  check(at::randn({2, 3, 9, 9}), 3, 2, 1);
  check(at::randn({2, 3, 8, 8}), 2, 1, 0);
  nn::MaxPool2d layer(2, 2);
  const at::Tensor x = at::randn({2, 3, 6, 6});
  EXPECT_TRUE(layer.forward(x).equal(at::max_pool2d(x, {2, 2}, {2, 2})));
}

TEST(SurgeryTest, ReplacedChildRunsInForward) {
  auto cnn = models::mnist_cnn(1, 10, 4);
  const at::Tensor x = at::randn({2, 1, 28, 28});
  cnn->eval();
  const at::Tensor before = cnn->forward(x);
  ASSERT_TRUE(cnn->replace("2", std::make_shared<Zero>()));  // the first ReLU
  const at::Tensor after = cnn->forward(x);
  EXPECT_FALSE(at::allclose(before, after));
  EXPECT_TRUE(dynamic_cast<Zero*>(cnn->named_children()["2"].get()) != nullptr);  // registry agrees
  EXPECT_FALSE(cnn->replace("no_such_child", std::make_shared<Zero>()));
  auto block = std::make_shared<models::BasicBlock>(4, 4, 1);
  EXPECT_TRUE(block->replace("conv1", std::make_shared<nn::Conv2d>(nn::Conv2dOptions(4, 4, 3).padding(1).bias(false))));
  EXPECT_EQ(block->forward(at::randn({1, 4, 8, 8})).sizes(), (std::vector<int64_t>{1, 4, 8, 8}));
}

}  // namespace
}  // namespace composer
