// The math of the algorithms that change the batch or the loss: LabelSmoothing, MixUp, CutMix, CutOut, ColOut,
// ProgressiveResizing.
#include "algorithms/algo_support.h"

#include <gtest/gtest.h>

using namespace composer;

namespace {

// A State holding `batch` and outputs with `classes` logits, for driving algorithms event by event.
struct Harness {
  Harness(Batch batch, int64_t classes) : logger(state) {
    state.batch = std::move(batch);
    state.outputs = torch::zeros({state.batch.num_samples(), classes});
    state.model = composer::testing::make_classifier(4, 4, classes);
  }
  State state;
  Logger logger;
};

}  // namespace

TEST(LabelSmoothingTest, TargetsAreSmoothedAndRestored) {
  const at::Tensor logits = torch::zeros({2, 4});
  const at::Tensor y = torch::tensor({2, 0});
  const at::Tensor s = functional::smooth_labels(logits, y, 0.1);
  EXPECT_TRUE(
      torch::allclose(s, torch::tensor({{0.025, 0.025, 0.925, 0.025}, {0.925, 0.025, 0.025, 0.025}}).to(at::kFloat)));
  Harness h(Batch(torch::zeros({2, 4}), y), 4);
  algorithms::LabelSmoothing ls;
  ASSERT_TRUE(ls.match(Event::BEFORE_LOSS, h.state));
  ls.apply(Event::BEFORE_LOSS, h.state, h.logger);
  EXPECT_TRUE(torch::allclose(h.state.batch.target(), s));
  ls.apply(Event::AFTER_LOSS, h.state, h.logger);
  EXPECT_TRUE(torch::equal(h.state.batch.target(), y));
  EXPECT_THROW(algorithms::LabelSmoothing(algorithms::LabelSmoothingOptions().smoothing(1.01)), std::invalid_argument);
}

// Composer's numbers: smoothing 1.0 is allowed (uniform targets) and an ignore_index target (-100) becomes the
// uniform row smoothing / K (its one-hot row is all zeros).
TEST(LabelSmoothingTest, IgnoreIndexTargetsAndFullSmoothingAsComposer) {
  const at::Tensor logits = torch::zeros({3, 4});
  const at::Tensor target = torch::tensor({1, -100, 3}, torch::kLong);
  const at::Tensor s = functional::smooth_labels(logits, target, 0.1);
  const at::Tensor expected = torch::tensor(
      {{0.025, 0.925, 0.025, 0.025}, {0.025, 0.025, 0.025, 0.025}, {0.025, 0.025, 0.025, 0.925}}, torch::kFloat);
  EXPECT_TRUE(torch::allclose(s, expected, 1e-6, 1e-7)) << s;
  EXPECT_TRUE(torch::allclose(functional::smooth_labels(logits, target, 1.0), torch::full({3, 4}, 0.25)));
  EXPECT_NO_THROW(algorithms::LabelSmoothing(algorithms::LabelSmoothingOptions().smoothing(1.0)));
  try {
    functional::smooth_labels(torch::zeros({2, 4}), torch::tensor({0, 4}, torch::kLong), 0.1);
    ADD_FAILURE() << "an index >= K was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("target index 4 is out of range for logits with 4 classes"), std::string::npos)
        << e.what();
  }
}

TEST(LabelSmoothingTest, DenseTargetsMustMatchTheLogits) {
  EXPECT_THROW(functional::smooth_labels(torch::zeros({2, 4}), torch::zeros({2, 3})), std::invalid_argument);
  EXPECT_THROW(functional::smooth_labels(torch::zeros({2, 4}), torch::zeros({2, 3}, at::kLong)), std::invalid_argument);
}

TEST(MixUpTest, InterpolatesInputsWithGivenMixingAndIndices) {
  const at::Tensor x = torch::arange(6, at::kFloat).view({3, 2});
  const at::Tensor y = torch::tensor({0, 1, 2});
  const at::Tensor perm = torch::tensor({2, 0, 1});
  auto [mixed, y_perm, m] = functional::mixup_batch(x, y, 0.3, 0.2, perm);
  EXPECT_DOUBLE_EQ(m, 0.3);
  EXPECT_TRUE(torch::allclose(mixed, x * 0.7 + x.index_select(0, perm) * 0.3));
  EXPECT_TRUE(torch::equal(y_perm, torch::tensor({2, 0, 1})));
}

TEST(MixUpTest, SampledMixingIsAtMostAHalfAndTargetsMixTheSame) {
  torch::manual_seed(0);
  const at::Tensor x = torch::randn({8, 3});
  const at::Tensor y = torch::arange(8) % 4;
  Harness h(Batch(x, y), 4);
  algorithms::MixUp mixup(algorithms::MixUpOptions().alpha(1.0));
  mixup.apply(Event::BEFORE_FORWARD, h.state, h.logger);
  const double m = mixup.mixing();
  EXPECT_GE(m, 0.0);
  EXPECT_LE(m, 0.5);
  mixup.apply(Event::BEFORE_LOSS, h.state, h.logger);
  const at::Tensor t = h.state.batch.target();
  EXPECT_TRUE(torch::allclose(t.sum(1), torch::ones({8})));
  // Each row puts 1 - m on its own class (plus m if its partner shares the class).
  for (int64_t i = 0; i < 8; ++i) EXPECT_GE(t[i][y[i].item<int64_t>()].item<double>(), 1.0 - m - 1e-6);
  EXPECT_FALSE(mixup.match(Event::BEFORE_BACKWARD, h.state));
  algorithms::MixUp interp(algorithms::MixUpOptions().interpolate_loss(true));
  EXPECT_TRUE(interp.match(Event::BEFORE_BACKWARD, h.state));
  EXPECT_FALSE(interp.match(Event::BEFORE_LOSS, h.state));
}

TEST(CutMixTest, BoxComesFromThePermutedSampleAndLambdaIsTheKeptArea) {
  const at::Tensor x = torch::arange(2).view({2, 1, 1, 1}).to(at::kFloat).expand({2, 1, 8, 8}).contiguous();
  const at::Tensor y = torch::tensor({0, 1});
  auto [out, y_perm, lam, box] =
      functional::cutmix_batch(x, y, std::nullopt, 1.0, functional::BoundingBox{2, 1, 6, 5}, torch::tensor({1, 0}));
  EXPECT_DOUBLE_EQ(lam, 1.0 - 16.0 / 64.0);
  EXPECT_EQ(out[0].sum().item<double>(), 16.0);  // the 4x4 box of ones pasted into the zeros image
  EXPECT_EQ(out[0][0][3][2].item<double>(), 1.0);
  EXPECT_EQ(out[0][0][0][0].item<double>(), 0.0);
  EXPECT_TRUE(torch::equal(y_perm, torch::tensor({1, 0})));
  EXPECT_THROW(functional::cutmix_batch(x, y, std::nullopt, 1.0, functional::BoundingBox{0, 0, 9, 2}),
               std::invalid_argument);
}

TEST(CutMixTest, SampledBoxesAreAtMostTheBetaSizedSquareAndTargetsMixByArea) {
  torch::manual_seed(1);
  const at::Tensor x = torch::randn({4, 3, 16, 16});
  for (int i = 0; i < 20; ++i) {
    auto [out, yp, lam, box] = functional::cutmix_batch(x, torch::arange(4), std::nullopt, 1.0);
    EXPECT_LE(box[2] - box[0], 16);
    EXPECT_LE(box[3] - box[1], 16);
    EXPECT_NEAR(lam, 1.0 - double((box[2] - box[0]) * (box[3] - box[1])) / 256.0, 1e-12);
  }
  Harness h(Batch(x, torch::tensor({0, 1, 2, 3})), 4);
  algorithms::CutMix cutmix;
  cutmix.apply(Event::BEFORE_FORWARD, h.state, h.logger);
  cutmix.apply(Event::BEFORE_LOSS, h.state, h.logger);
  const at::Tensor t = h.state.batch.target();
  const double lam = cutmix.adjusted_lambda();
  EXPECT_TRUE(torch::allclose(t.sum(1), torch::ones({4})));
  for (int64_t i = 0; i < 4; ++i) EXPECT_GE(t[i][i].item<double>(), lam - 1e-6);
}

TEST(CutOutTest, ZeroesOneSquareOfTheRequestedSide) {
  torch::manual_seed(2);
  const at::Tensor x = torch::ones({2, 3, 32, 32});
  for (int i = 0; i < 10; ++i) {
    const at::Tensor out = functional::cutout_batch(x, 1, 0.25);  // side int(32 * 0.25) = 8
    const int64_t zeros = (out[0][0] == 0).sum().item<int64_t>();
    EXPECT_GT(zeros, 0);
    EXPECT_LE(zeros, 64);
    EXPECT_TRUE(torch::equal(out[0], out[1]));  // one mask per batch
  }
  const at::Tensor centre = functional::cutout_batch(torch::ones({1, 1, 100, 100}), 1, 10.0);
  EXPECT_LE((centre == 0).sum().item<int64_t>(), 100);
}

TEST(ColOutTest, KeepsSortedRowsAndColumnsSharedByTheBatch) {
  torch::manual_seed(3);
  const at::Tensor x = torch::arange(2 * 20 * 10, at::kFloat).view({2, 1, 20, 10});
  auto [out, target] = functional::colout_batch(x, {}, 0.15, 0.3);
  ASSERT_EQ(out.sizes(), (std::vector<int64_t>{2, 1, 17, 7}));
  const at::Tensor first_col = out[0][0].select(1, 0);
  EXPECT_TRUE(torch::all(first_col.diff() > 0).item<bool>());                   // rows in order
  EXPECT_TRUE(torch::equal(out[1] - out[0], torch::full_like(out[0], 200.0)));  // same crop for every sample
  const at::Tensor masks = torch::arange(2 * 20 * 10).view({2, 20, 10});
  auto [o2, t2] = functional::colout_batch(x, masks, 0.15, 0.3);  // auto: spatial targets are cropped too
  EXPECT_EQ(t2.sizes(), (std::vector<int64_t>{2, 17, 7}));
  EXPECT_TRUE(torch::equal(o2.squeeze(1).to(at::kLong), t2));
}

TEST(ProgressiveResizingTest, SizeScheduleFollowsComposer) {
  using functional::progressive_resizing_scale;
  EXPECT_DOUBLE_EQ(progressive_resizing_scale(0.0, 0.5, 0.5, 0.2), 0.5);
  EXPECT_DOUBLE_EQ(progressive_resizing_scale(0.49, 0.5, 0.5, 0.2), 0.5);
  EXPECT_NEAR(progressive_resizing_scale(0.65, 0.5, 0.5, 0.2), 0.75, 1e-12);
  EXPECT_DOUBLE_EQ(progressive_resizing_scale(0.8, 0.5, 0.5, 0.2), 1.0);
  EXPECT_DOUBLE_EQ(progressive_resizing_scale(0.95, 0.5, 0.5, 0.2), 1.0);
  EXPECT_EQ(functional::pinned_width(32, 0.75, 4), 24);
  EXPECT_EQ(functional::pinned_width(28, 0.5, 4), 16);  // round(3.5) = 4 increments
  const at::Tensor x = torch::randn({2, 3, 32, 32});
  auto [r, t] = functional::resize_batch(x, torch::tensor({0, 1}), 0.75);
  EXPECT_EQ(r.sizes(), (std::vector<int64_t>{2, 3, 24, 24}));
  EXPECT_TRUE(torch::equal(r[0][0][0][0], x[0][0][0][0]));  // nearest neighbour
  auto [c, t2] = functional::resize_batch(x, {}, 0.5, functional::ResizeMode::CROP);
  EXPECT_EQ(c.sizes(), (std::vector<int64_t>{2, 3, 16, 16}));
  auto [same, t3] = functional::resize_batch(x, {}, 1.0);
  EXPECT_TRUE(same.is_same(x));
}

TEST(ProgressiveResizingTest, AlgorithmResizesByElapsedDuration) {
  Harness h(Batch(torch::randn({2, 3, 32, 32}), torch::tensor({0, 1})), 2);
  h.state.max_duration = Time::from_batch(100);
  h.state.timestamp.batch = 65;
  algorithms::ProgressiveResizing pr;
  pr.apply(Event::AFTER_DATALOADER, h.state, h.logger);
  EXPECT_EQ(h.state.batch.input().size(3), 24);
  h.state.timestamp.batch = 90;
  h.state.batch = Batch(torch::randn({2, 3, 32, 32}), torch::tensor({0, 1}));
  pr.apply(Event::AFTER_DATALOADER, h.state, h.logger);
  EXPECT_EQ(h.state.batch.input().size(3), 32);
  h.state.max_duration.reset();
  EXPECT_THROW(pr.apply(Event::AFTER_DATALOADER, h.state, h.logger), std::invalid_argument);
}

TEST(MixUpTest, InterpolateLossMixesTheTwoLosses) {
  Harness h(Batch(torch::randn({8, 4}), torch::arange(8) % 4), 4);
  const at::Tensor x = h.state.batch.input(), y = h.state.batch.target();
  algorithms::MixUp mixup(algorithms::MixUpOptions().alpha(1.0).interpolate_loss(true));
  torch::manual_seed(7);
  mixup.apply(Event::BEFORE_FORWARD, h.state, h.logger);
  torch::manual_seed(7);  // the same draws through the functional form give the permuted targets
  const auto [mixed, y_perm, m] = functional::mixup_batch(x, y, std::nullopt, 1.0);
  ASSERT_TRUE(torch::allclose(h.state.batch.input(), mixed));
  h.state.outputs = h.state.model->forward(h.state.batch);
  h.state.loss = h.state.model->loss(h.state.outputs, h.state.batch);
  const at::Tensor own = h.state.loss.detach().clone();
  mixup.apply(Event::BEFORE_BACKWARD, h.state, h.logger);
  const at::Tensor other = h.state.model->loss(h.state.outputs, Batch(mixed, y_perm));
  EXPECT_TRUE(torch::allclose(h.state.loss, own * (1 - m) + other * m));
  EXPECT_TRUE(torch::equal(h.state.batch.target(), y));  // targets untouched with interpolate_loss
}

TEST(CutMixTest, SegmentationMasksGetTheSameBoxPasted) {
  const at::Tensor x = torch::arange(2).view({2, 1, 1, 1}).to(at::kFloat).expand({2, 1, 8, 8}).contiguous();
  const at::Tensor masks =
      torch::arange(2).view({2, 1, 1}).expand({2, 8, 8}).contiguous();  // mask value = sample index
  int64_t pasted = 0;
  for (uint64_t seed = 0; seed < 10; ++seed) {
    torch::manual_seed(seed);
    Harness h(Batch(x, masks), 2);
    h.state.outputs = torch::zeros({2, 2, 8, 8});
    algorithms::CutMix cutmix;
    cutmix.apply(Event::BEFORE_FORWARD, h.state, h.logger);
    cutmix.apply(Event::BEFORE_LOSS, h.state, h.logger);
    const at::Tensor y = h.state.batch.target();
    EXPECT_EQ(y.scalar_type(), at::kLong);
    // Where the image got pixels from another sample, the mask did too.
    EXPECT_TRUE(torch::equal(y.to(at::kFloat), h.state.batch.input().squeeze(1)));
    pasted += (y != masks).sum().item<int64_t>();
  }
  EXPECT_GT(pasted, 0);
}
