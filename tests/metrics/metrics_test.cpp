#include "support/errors.h"
#include "support/test_support.h"

#include <gtest/gtest.h>

#include <cmath>

namespace composer {
namespace {

TEST(AccuracyTest, TopOneAndTopK) {
  const at::Tensor logits = torch::tensor({0.1, 0.7, 0.2,  // pred 1, second 2
                                           0.8, 0.1, 0.1,  // pred 0, second 1/2
                                           0.3, 0.3, 0.4},
                                          at::kFloat)
                                .reshape({3, 3});
  const at::Tensor target = torch::tensor({1, 2, 0}, at::kLong);
  Accuracy top1;
  top1.update(logits, target);
  EXPECT_NEAR(top1.compute(), 1.0 / 3, 1e-12);
  Accuracy top2(2);
  top2.update(logits, target);
  EXPECT_NEAR(top2.compute(), 2.0 / 3, 1e-12);  // rows 0 and 2 (0.3 ties, topk keeps one of them)
}

TEST(AccuracyTest, AccumulatesAndResets) {
  Accuracy acc;
  EXPECT_TRUE(std::isnan(acc.compute()));
  acc.update(torch::tensor({{1.0, 0.0}}), torch::tensor({0}, at::kLong));
  acc.update(torch::tensor({{1.0, 0.0}, {0.0, 1.0}, {0.0, 1.0}}), torch::tensor({1, 1, 0}, at::kLong));
  EXPECT_NEAR(acc.compute(), 0.5, 1e-12);
  acc.reset();
  EXPECT_TRUE(std::isnan(acc.compute()));
}

TEST(AccuracyTest, DenseTargetsUseArgmax) {
  Accuracy acc;
  acc.update(torch::tensor({{2.0, 1.0}, {0.0, 3.0}}), torch::tensor({{0.9, 0.1}, {0.7, 0.3}}));
  EXPECT_NEAR(acc.compute(), 0.5, 1e-12);
}

TEST(MetricTest, StatesSumAcrossRanks) {
  // Two "ranks" see half the data each; adding their states equals one metric over all of it.
  Accuracy r0, r1, all;
  const at::Tensor a = torch::tensor({{1.0, 0.0}, {0.0, 1.0}}), ya = torch::tensor({0, 0}, at::kLong);
  const at::Tensor b = torch::tensor({{1.0, 0.0}}), yb = torch::tensor({0}, at::kLong);
  r0.update(a, ya);
  r1.update(b, yb);
  all.update(a, ya);
  all.update(b, yb);
  r0.set_state(r0.state() + r1.state());
  EXPECT_DOUBLE_EQ(r0.compute(), all.compute());
  EXPECT_THROW(r0.set_state(at::zeros({3}, at::kDouble)), std::invalid_argument);
}

TEST(CrossEntropyTest, MeanOfBatchMeans) {
  CrossEntropy ce;
  const at::Tensor l1 = torch::tensor({{2.0, 0.0}, {0.0, 2.0}}), y1 = torch::tensor({0, 0}, at::kLong);
  const at::Tensor l2 = torch::tensor({{1.0, 1.0}}), y2 = torch::tensor({1}, at::kLong);
  ce.update(l1, y1);
  ce.update(l2, y2);
  const double b1 = at::cross_entropy_loss(l1, y1).item<double>(), b2 = at::cross_entropy_loss(l2, y2).item<double>();
  EXPECT_NEAR(ce.compute(), (b1 + b2) / 2, 1e-6);
}

TEST(LossMetricTest, UsesTheGivenFunction) {
  LossMetric m([](const at::Tensor& p, const at::Tensor& t) { return (p - t).abs().mean(); }, "L1");
  m.update(torch::tensor({1.0, 2.0}), torch::tensor({0.0, 0.0}));
  m.update(torch::tensor({0.0}), torch::tensor({0.0}));
  EXPECT_NEAR(m.compute(), (1.5 + 0.0) / 2, 1e-12);
  EXPECT_EQ(m.name(), "L1");
}

TEST(LanguageMetricsTest, TokenWeightedCrossEntropyAndPerplexity) {
  torch::manual_seed(0);
  const at::Tensor logits = at::randn({2, 3, 5});
  at::Tensor labels = torch::tensor({{1, 2, -100}, {4, -100, 0}}, at::kLong);
  LanguageCrossEntropy ce;
  LanguagePerplexity ppl;
  ce.update(logits, labels);
  ppl.update(logits, labels);
  const double expected =
      at::cross_entropy_loss(logits.reshape({-1, 5}), labels.reshape({-1}), {}, at::Reduction::Mean, -100)
          .item<double>();
  EXPECT_NEAR(ce.compute(), expected, 1e-6);
  EXPECT_NEAR(ppl.compute(), std::exp(expected), 1e-5);
}

TEST(LanguageMetricsTest, MaskedAccuracyIgnoresPadding) {
  const at::Tensor logits = torch::tensor({{{0.0, 1.0}, {1.0, 0.0}, {1.0, 0.0}}});  // preds 1, 0, 0
  const at::Tensor labels = torch::tensor({{1, 1, -100}}, at::kLong);
  MaskedAccuracy acc;
  acc.update(logits, labels);
  EXPECT_NEAR(acc.compute(), 0.5, 1e-12);
}

TEST(MetricTest, CloneEmptyKeepsSettings) {
  Accuracy top3(3);
  top3.update(torch::tensor({{1.0, 0.0, 0.0, 0.0}}), torch::tensor({0}, at::kLong));
  auto fresh = top3.clone_empty();
  EXPECT_TRUE(std::isnan(fresh->compute()));
  fresh->update(torch::tensor({{4.0, 3.0, 2.0, 1.0}}), torch::tensor({2}, at::kLong));
  EXPECT_DOUBLE_EQ(fresh->compute(), 1.0);
}

// A list state keeps every pair; two ranks' rows concatenated compute what one rank with all of them computes, and
// reset empties it. (The values against torchmetrics: tests/peer/losses_metrics_peer_test.cpp.)
TEST(ListStateTest, RowsConcatenateAcrossRanksAndReset) {
  BinaryAUROC a, b, all;
  const at::Tensor p = torch::tensor({0.9, 0.2, 0.7, 0.7, 0.1, 0.4}, at::kDouble);
  const at::Tensor t = torch::tensor({1, 0, 1, 0, 0, 1}, at::kLong);
  a.update(p.narrow(0, 0, 2), t.narrow(0, 0, 2));
  b.update(p.narrow(0, 2, 4), t.narrow(0, 2, 4));
  all.update(p, t);
  EXPECT_EQ(all.rows().sizes(), at::IntArrayRef({6, 2}));
  auto combined = a.clone_empty();
  combined->set_rows(at::cat({a.rows(), b.rows()}));
  EXPECT_DOUBLE_EQ(combined->compute(), all.compute());
  // 9 positive-negative pairs: 7 ordered right, 1 tie (0.7, 0.7) counting a half, 1 wrong (0.4 < 0.7).
  EXPECT_NEAR(all.compute(), 7.5 / 9.0, 1e-12);
  all.reset();
  EXPECT_EQ(all.rows().size(0), 0);
  EXPECT_TRUE(std::isnan(all.compute()));
  EXPECT_NE(testing::any_error_of([&] { all.set_rows(at::zeros({3})); }).find("rows must be [n, 2]"),
            std::string::npos);
}

TEST(SegmentationMetricsTest, MIoUAndDiceCountClassesAndRefuseWrongShapes) {
  MIoU miou(3);
  // Predictions 0, 1, 1, 2 for targets 0, 1, 2, ignored: class 0 1/1, class 1 1/2, class 2 0/1.
  const at::Tensor logits = torch::tensor({{{5.0, 0.0, 0.0, 0.0}}, {{0.0, 5.0, 5.0, 0.0}}, {{0.0, 0.0, 0.0, 5.0}}})
                                .permute({1, 0, 2})
                                .contiguous();  // [1, 3, 4]
  miou.update(logits, torch::tensor({{0, 1, 2, -1}}, at::kLong));
  EXPECT_NEAR(miou.compute(), 100.0 * (1.0 + 0.5 + 0.0) / 3.0, 1e-9);
  EXPECT_NE(testing::any_error_of([&] {
              miou.update(logits, torch::tensor({0, 1}, at::kLong));
            }).find("MIoU: logits [N, C, ...] need targets [N, ...]"),
            std::string::npos);
  Dice dice(2);
  EXPECT_NE(testing::any_error_of([&] {
              dice.update(at::zeros({1, 2, 4}), at::zeros({1, 4}, at::kLong));
            }).find("Dice: logits need 3 channels in dim 1 (background and 2 classes)"),
            std::string::npos);
  EXPECT_NE(testing::any_error_of([] { MIoU(0); }).find("MIoU.num_classes must be >= 1"), std::string::npos);
}

TEST(BinaryF1ScoreTest, CountsLikeF1AndIsZeroWithoutPositives) {
  BinaryF1Score f1;
  f1.update(torch::tensor({0.9, 0.8, 0.2, 0.6}, at::kDouble), torch::tensor({1, 0, 1, 1}, at::kLong));
  EXPECT_NEAR(f1.compute(), 2.0 * 2 / (2.0 * 2 + 1 + 1), 1e-12);  // tp 2, fp 1, fn 1
  BinaryF1Score none;
  none.update(torch::tensor({0.1}, at::kDouble), torch::tensor({0}, at::kLong));
  EXPECT_EQ(none.compute(), 0.0);
  EXPECT_NE(testing::any_error_of([&] {
              none.update(torch::tensor({0.1}), torch::tensor({2}, at::kLong));
            }).find("BinaryF1Score: targets must be 0 or 1"),
            std::string::npos);
}

}  // namespace
}  // namespace composer
