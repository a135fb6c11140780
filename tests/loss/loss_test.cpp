// The losses' contracts without the Python peer (tests/peer/losses_metrics_peer_test.cpp compares the values with
// Composer's): what each takes, the errors for what it does not, and the loss registry as configs use it.
#include "composer/loss/loss.h"
#include "composer/loss/registry.h"
#include "composer/models/initializers.h"
#include "composer/models/registry.h"
#include "support/errors.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace composer {
namespace {

TEST(LossTest, IndexAndOneHotTargetsGiveTheSameLoss) {
  torch::manual_seed(0);
  const at::Tensor logits = at::randn({5, 3});
  const at::Tensor indices = at::tensor({0, 2, 1, 1, 0}, at::kLong);
  const at::Tensor one_hot = ensure_targets_one_hot(logits, indices);
  EXPECT_TRUE(at::equal(one_hot.argmax(1), indices));
  EXPECT_TRUE(at::allclose(soft_cross_entropy(logits, indices), soft_cross_entropy(logits, one_hot)));
  EXPECT_TRUE(at::allclose(composer::binary_cross_entropy_with_logits(logits, indices),
                           composer::binary_cross_entropy_with_logits(logits, one_hot)));
  EXPECT_EQ(soft_cross_entropy_per_sample(logits, indices).sizes(), at::IntArrayRef({5}));
}

TEST(LossTest, BadInputsNameWhatWasExpected) {
  const at::Tensor logits = at::randn({4, 3});
  const auto error = [](const std::function<void()>& f) { return testing::any_error_of(f); };
  EXPECT_NE(error([&] {
              soft_cross_entropy(logits, at::zeros({4, 2, 2}, at::kLong));
            }).find("loss targets of shape [4, 2, 2] for inputs of shape [4, 3]"),
            std::string::npos);
  EXPECT_NE(error([&] {
              soft_cross_entropy(logits, at::zeros({4}, at::kLong), SoftCrossEntropyOptions().reduction("avg"));
            }).find("soft_cross_entropy: reduction 'avg'; expected mean, sum or none"),
            std::string::npos);
  EXPECT_NE(error([&] {
              composer::binary_cross_entropy_with_logits(logits, at::tensor({0, 1, 3, 2}, at::kLong));
            }).find("a target index is 3, beyond the 3 classes"),
            std::string::npos);
  EXPECT_NE(error([&] {
              composer::binary_cross_entropy_with_logits(logits, at::zeros({4}, at::kFloat));
            }).find("index targets must be an integer type"),
            std::string::npos);
  EXPECT_NE(error([] {
              DiceLoss(DiceLossOptions().sigmoid(true).softmax(true));
            }).find("sigmoid and softmax cannot both be true"),
            std::string::npos);
  EXPECT_NE(error([&] {
              soft_cross_entropy(logits, at::zeros({4, 3}));
            }).find("no target has probability > 0"),
            std::string::npos);
}

TEST(LossRegistryTest, BuildsEveryLossByNameWithItsOptions) {
  const LossRegistry& registry = loss_registry();
  EXPECT_EQ(registry.names(), "binary_cross_entropy_with_logits, dice_loss, soft_cross_entropy");
  const at::Tensor logits = at::randn({4, 3});
  const at::Tensor target = at::tensor({0, 1, 2, 1}, at::kLong);
  const auto bce = registry.make("binary_cross_entropy_with_logits", {{"scale_by_batch_size", "false"}}, "");
  EXPECT_TRUE(at::allclose((*bce)(logits, target),
                           composer::binary_cross_entropy_with_logits(
                               logits, target, BinaryCrossEntropyOptions().scale_by_batch_size(false))));
  EXPECT_TRUE(at::allclose((*registry.make("DiceLoss", {{"softmax", "true"}}, ""))(logits, target),
                           DiceLoss(DiceLossOptions().softmax(true))(logits, target)));
  const std::string bad = testing::any_error_of([&] {
    registry.make("soft_cross_entropy", {{"reduction", "avg"}}, "");
  });
  EXPECT_NE(bad.find("reduction"), std::string::npos) << bad;
  EXPECT_NE(bad.find("expected mean, sum or none"), std::string::npos) << bad;
  EXPECT_NE(testing::any_error_of([&] { registry.require("l2"); }).find("unknown loss 'l2'"), std::string::npos);
}

// A vision model's config picks its loss and initializers by Composer's names; a wrong name says which key.
TEST(LossRegistryTest, ModelConfigsNameTheirLossAndInitializers) {
  const auto& models = models::model_registry();
  const models::ModelInputs inputs{1, 4, 3, 0};
  auto model =
      models.make("mlp", {{"hidden", "[8]"}, {"loss_name", "binary_cross_entropy_with_logits"}}, "model", inputs);
  const Batch batch(at::randn({2, 1, 4, 4}), at::tensor({0, 2}, at::kLong));
  const at::Tensor out = model->forward(batch);
  EXPECT_TRUE(at::allclose(model->loss(out, batch), composer::binary_cross_entropy_with_logits(out, batch.target())));
  torch::manual_seed(1);
  auto ones = models.make("mnist_cnn", {{"width", "4"}, {"initializers", "[kaiming_normal, linear_log_constant_bias]"}},
                          "model", inputs);
  for (const auto& p : ones->named_parameters()) {
    if (p.key().find("bias") != std::string::npos && p.value().size(0) == 3) {  // the last Linear's: 3 classes
      EXPECT_TRUE(at::allclose(p.value(), at::full({3}, -std::log(3.0f)))) << p.key();
    }
  }
  const std::string bad_loss = testing::any_error_of([&] {
    models.make("mlp", {{"loss_name", "l2"}}, "model", inputs);
  });
  EXPECT_NE(bad_loss.find("model.loss_name 'l2': expected one of binary_cross_entropy_with_logits, dice_loss"),
            std::string::npos)
      << bad_loss;
  const std::string bad_init = testing::any_error_of([&] {
    models.make("mlp", {{"initializers", "[bn_ones, orthogonal]"}}, "model", inputs);
  });
  EXPECT_NE(bad_init.find("model.initializers[1]: unknown initializer 'orthogonal'; expected one of kaiming_normal"),
            std::string::npos)
      << bad_init;
}

}  // namespace
}  // namespace composer
