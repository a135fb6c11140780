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

}  // namespace
}  // namespace composer
