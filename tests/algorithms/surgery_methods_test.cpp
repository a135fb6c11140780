// The surgery methods of the language-model and cross-domain set: GatedLinearUnits (GPT-2 and BERT MLPs),
// GyroDropout (preselected dropout masks) and LowPrecisionGroupNorm (GroupNorm in the autocast dtype).
#include "algorithms/algo_support.h"
#include "composer/utils/compat.h"
#include "support/errors.h"
#include "support/test_support.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace composer;
using composer::testing::error_of;

namespace {

int64_t count_params(const torch::nn::Module& m) {
  int64_t n = 0;
  for (const auto& p : m.parameters()) n += p.numel();
  return n;
}

size_t optimizer_params(const torch::optim::Optimizer& o) {
  size_t n = 0;
  for (const auto& g : o.param_groups()) n += g.params().size();
  return n;
}

// A classifier with a dropout layer: Linear(8, 32), ReLU, Dropout, Linear(32, 4).
std::shared_ptr<ComposerClassifier> dropout_classifier(double p = 0.5) {
  torch::manual_seed(0);
  auto seq = std::make_shared<nn::Sequential>();
  seq->push_back(std::make_shared<nn::Linear>(8, 32));
  seq->push_back(std::make_shared<nn::ReLU>());
  seq->push_back(std::make_shared<nn::Dropout>(p));
  seq->push_back(std::make_shared<nn::Linear>(32, 4));
  return ComposerClassifier::wrap(seq);
}

}  // namespace

// Every GPT-2 block's MLP becomes a GatedMLP of the same widths (three d x d_ff matrices instead of two), the
// optimizer trains the new weights, and the model trains.
TEST(GatedLinearUnitsTest, GPTAndBertMLPsBecomeGatedAndTrain) {
  auto model = composer::testing::tiny_gpt();  // d_model 16, d_ff 64, 2 layers
  const int64_t before = count_params(*model);
  Trainer trainer(composer::testing::quiet_options(model)
                      .train_dataloader(composer::testing::tiny_token_loader())
                      .max_duration(Time::from_batch(4))
                      .algorithms({algorithms::make_algorithm("gated_linear_units")}));
  EXPECT_EQ(count_module_instances<nn::GatedMLP>(*model), 2);
  // Per block: + 16 * 64 weights (the third matrix) - the 64 biases of c_fc (the gates have none by default).
  EXPECT_EQ(count_params(*model), before + 2 * (16 * 64 - 64));
  size_t all = model->parameters().size();
  EXPECT_EQ(optimizer_params(*trainer.state().optimizer), all);
  bool has_gate = false;
  for (const auto& item : model->named_parameters())
    has_gate |= item.key().find("h.0.mlp.gated_layer.weight") != std::string::npos;
  EXPECT_TRUE(has_gate);
  trainer.fit();
  EXPECT_TRUE(std::isfinite(trainer.state().total_loss_dict.at("loss/train/total")));

  models::TransformerConfig config;
  config.vocab_size(17).max_seq_len(16).n_layer(2).n_head(2).d_model(16).dropout(0.1);
  models::BertMLM bert(config);
  const auto done = functional::apply_gated_linear_units(bert, nullptr, functional::GLUActivation::RELU, true, true);
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[0].path, "layers.0.ffn");
  auto* glu = dynamic_cast<nn::GatedMLP*>(done[0].new_module.get());
  ASSERT_NE(glu, nullptr);
  EXPECT_NE(dynamic_cast<nn::ReLU*>(&glu->child("act")), nullptr);
  EXPECT_TRUE(glu->has("dropout"));
  EXPECT_TRUE(static_cast<nn::Linear&>(glu->child("gated_layer")).bias.defined());
  bert.eval();
  const at::Tensor logits = bert.forward(at::randint(0, 17, {2, 16}, at::kLong));
  EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{2, 16, 17}));
  // Applied again, there is no MLP left to replace.
  EXPECT_TRUE(functional::apply_gated_linear_units(bert, nullptr).empty());
  EXPECT_NE(error_of([] {
              algorithms::make_algorithm("gated_linear_units", {{"act_fn", "tanh"}});
            }).find("gated_linear_units.act_fn: expected one of gelu, relu, sigmoid, got 'tanh'"),
            std::string::npos);
}

// A checkpoint of a gated model loads into a fresh one: the algorithm is required on load and re-applies first.
TEST(GatedLinearUnitsTest, ACheckpointOfAGatedModelLoads) {
  const auto dir = std::filesystem::temp_directory_path() / "glu_checkpoints";
  std::filesystem::remove_all(dir);
  auto model = composer::testing::tiny_gpt();
  {
    Trainer trainer(composer::testing::quiet_options(model)
                        .train_dataloader(composer::testing::tiny_token_loader())
                        .max_duration(Time::from_batch(2))
                        .save_folder(dir.string())
                        .algorithms({algorithms::make_algorithm("gated_linear_units")}));
    trainer.fit();
  }
  auto fresh = composer::testing::tiny_gpt(5);
  Trainer loaded(composer::testing::quiet_options(fresh)
                     .train_dataloader(composer::testing::tiny_token_loader())
                     .max_duration(Time::from_batch(2))
                     .load_path((dir / "latest-rank0.pt").string()));
  EXPECT_EQ(count_module_instances<nn::GatedMLP>(*fresh), 2);
  auto a = model->named_parameters(), b = fresh->named_parameters();
  for (const auto& item : a) EXPECT_TRUE(torch::equal(item.value(), b[item.key()])) << item.key();
  std::filesystem::remove_all(dir);
}

// In training, each group of N / tau samples shares one of tau masks drawn from the sigma preselected ones, kept
// entries are scaled by 1 / (1 - p), the masks change every iter_num steps; evaluation passes inputs through.
TEST(GyroDropoutTest, SamplesShareMasksFromThePreselectedSet) {
  torch::manual_seed(1);
  nn::GyroDropoutLayer layer(/*total_steps=*/64, /*p=*/0.5, /*sigma=*/8, /*tau=*/2);  // iter_num = 64/8*2 = 16
  layer.train();
  const at::Tensor x = at::ones({6, 10});
  const at::Tensor y = layer.forward(x);
  EXPECT_EQ(layer.iter_num, 16);
  EXPECT_EQ(layer.preselect_masks.sizes(), (std::vector<int64_t>{8, 10}));
  EXPECT_TRUE(torch::equal(y.ne(0), y.eq(2))) << "kept entries are x / (1 - p)";
  for (int64_t i : {1, 2}) EXPECT_TRUE(torch::equal(y[i], y[0])) << "samples 0-2 share the first mask";
  for (int64_t i : {4, 5}) EXPECT_TRUE(torch::equal(y[i], y[3])) << "samples 3-5 share the second mask";
  for (int64_t i = 0; i < 6; i += 3) {
    bool preselected = false;
    for (int64_t m = 0; m < 8; ++m) preselected |= torch::equal(y[i] / 2, layer.preselect_masks[m]);
    EXPECT_TRUE(preselected) << "sample " << i << "'s mask is one of the sigma preselected";
  }
  const at::Tensor masks = layer.selected_masks.clone();
  for (int step = 1; step < 16; ++step) layer.forward(x);
  EXPECT_TRUE(torch::equal(layer.selected_masks, masks)) << "the same masks for iter_num steps";
  layer.eval();
  EXPECT_TRUE(torch::equal(layer.forward(x), x));
  layer.train();
  EXPECT_EQ(error_of([&] {
              layer.forward(at::ones({5, 10}));
            }),
            "GyroDropoutLayer: the batch (5) must be a multiple of tau (2)");
  EXPECT_EQ(error_of([&] {
              layer.forward(at::ones({4, 2, 5}));
            }),
            "GyroDropoutLayer: expects [N, features] inputs, got shape [4, 2, 5]");
}

// Through the Trainer: FIT_START replaces the Dropout, sized for the run's batches, and the model trains.
TEST(GyroDropoutTest, ReplacesDropoutAtFitStart) {
  auto model = dropout_classifier();
  const Batch data = composer::testing::make_blobs(64);
  Trainer trainer(composer::testing::quiet_options(model)
                      .train_dataloader(composer::testing::make_loader(data, 16))
                      .max_duration(Time::from_epoch(2))
                      .algorithms({algorithms::make_algorithm("gyro_dropout", {{"sigma", "4"}, {"tau", "4"}})}));
  EXPECT_EQ(count_module_instances<nn::GyroDropoutLayer>(*model), 0) << "not before FIT_START";
  trainer.fit();
  ASSERT_EQ(count_module_instances<nn::GyroDropoutLayer>(*model), 1);
  for (const auto& item : model->named_modules()) {
    if (auto* gyro = dynamic_cast<nn::GyroDropoutLayer*>(item.value().get())) {
      EXPECT_EQ(gyro->total_steps, 8);  // 2 epochs of 4 batches
      EXPECT_EQ(gyro->iter_num, 8);     // int(8 / 4) * 4
      EXPECT_EQ(gyro->training_step, 8);
    }
  }
  EXPECT_TRUE(std::isfinite(trainer.state().total_loss_dict.at("loss/train/total")));
  EXPECT_EQ(error_of([] {
              algorithms::make_algorithm("gyro_dropout", {{"tau", "300"}});
            }),
            "GyroDropout.tau must be in [1, sigma], got 300.0");
  EXPECT_EQ(error_of([] {
              algorithms::make_algorithm("gyro_dropout", {{"p", "1"}});
            }),
            "GyroDropout.p must be in [0.0, 1.0), got 1.0");
}

// Under bf16 autocast an LPGroupNorm returns bfloat16, group_norm's value on the bfloat16-cast input and weights;
// the surgery keeps the weights; at fp32 nothing changes.
TEST(LowPrecisionGroupNormTest, NormsRunInTheAutocastDtypeAtBf16Only) {
  torch::manual_seed(0);
  auto seq = std::make_shared<nn::Sequential>();
  seq->push_back(std::make_shared<nn::Conv2d>(nn::Conv2dOptions(3, 8, 3).padding(1)));
  seq->push_back(std::make_shared<nn::GroupNorm>(2, 8));
  seq->push_back(std::make_shared<nn::ReLU>());
  seq->push_back(std::make_shared<nn::GlobalAvgPool>());
  seq->push_back(std::make_shared<nn::Linear>(8, 10));
  auto model = ComposerClassifier::wrap(seq);
  {
    at::NoGradGuard no_grad;
    static_cast<nn::GroupNorm&>(seq->child("1")).weight.uniform_(0.5, 1.5);
  }
  const at::Tensor gamma = static_cast<nn::GroupNorm&>(seq->child("1")).weight.clone();
  Trainer trainer(composer::testing::quiet_options(model)
                      .train_dataloader(composer::testing::tiny_image_loader())
                      .precision(Precision::AMP_BF16)
                      .max_duration(Time::from_batch(2))
                      .algorithms({algorithms::make_algorithm("low_precision_groupnorm")}));
  ASSERT_EQ(count_module_instances<nn::LPGroupNorm>(*model), 1);
  EXPECT_TRUE(torch::equal(static_cast<nn::GroupNorm&>(seq->child("1")).weight, gamma));
  trainer.fit();
  EXPECT_TRUE(std::isfinite(trainer.state().total_loss_dict.at("loss/train/total")));

  nn::LPGroupNorm low(2, 6);
  nn::GroupNorm plain(2, 6);
  const at::Tensor x = at::randn({3, 6, 4, 4});
  {
    compat::AutocastGuard autocast(c10::DeviceType::CPU, at::kBFloat16);
    const at::Tensor y = low.forward(x);
    EXPECT_EQ(y.scalar_type(), at::kBFloat16);
    EXPECT_EQ(plain.forward(x).scalar_type(), at::kFloat);  // autocast runs group_norm in float32
    at::Tensor expected;
    {
      compat::AutocastOff off(c10::DeviceType::CPU);
      expected = at::group_norm(x.to(at::kBFloat16), 2, low.weight.to(at::kBFloat16), low.bias.to(at::kBFloat16));
    }
    EXPECT_TRUE(torch::equal(y, expected));
    EXPECT_TRUE(compat::autocast_enabled(c10::DeviceType::CPU));
  }
  EXPECT_EQ(low.forward(x).scalar_type(), at::kFloat);
  nn::LPGroupNorm no_affine(3, 6, 1e-5, false);
  EXPECT_TRUE(no_affine.parameters().empty());
  EXPECT_EQ(error_of([] { nn::GroupNorm(4, 6); }), "GroupNorm: num_channels (6) must be divisible by num_groups (4)");
  EXPECT_EQ(error_of([] {
              algorithms::make_algorithm("low_precision_groupnorm", {{"apply_at", "fit_start"}});
            }),
            "LowPrecisionGroupNorm.apply_at must be 'init', 'before_load' or 'after_load', got 'fit_start'");

  auto fp32_model = ComposerClassifier::wrap(std::make_shared<nn::GroupNorm>(2, 4));
  Trainer fp32(composer::testing::quiet_options(fp32_model)
                   .train_dataloader(composer::testing::tiny_image_loader())
                   .algorithms({algorithms::make_algorithm("low_precision_groupnorm")}));
  EXPECT_EQ(count_module_instances<nn::LPGroupNorm>(*fp32_model), 0);
}
