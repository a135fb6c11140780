#include "support/test_support.h"

#include <gtest/gtest.h>

namespace composer {
namespace {

std::shared_ptr<TensorDataset> numbered(int64_t n) {
  return std::make_shared<TensorDataset>(Batch(at::arange(n).reshape({n, 1, 1, 1}).to(at::kFloat), at::arange(n)));
}

// Noise added by the transform depends only on (seed, epoch, batch index).
BatchTransform noisy() {
  return [](Batch b, at::Generator& gen) {
    b.set(int64_t{0}, b.input() + at::rand(b.input().sizes(), gen));
    return b;
  };
}

std::vector<Batch> epoch(DatasetLoader& l, int64_t e, int64_t skip = 0) {
  l.set_epoch(e);
  l.reset();
  l.skip(skip);
  std::vector<Batch> out;
  while (auto b = l.next()) out.push_back(*b);
  return out;
}

void expect_same(const std::vector<Batch>& a, const std::vector<Batch>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(a[i].input().equal(b[i].input())) << "batch " << i;
    EXPECT_TRUE(a[i].target().equal(b[i].target())) << "batch " << i;
  }
}

TEST(DatasetLoaderTest, WorkersDoNotChangeTheBatches) {
  auto ds = numbered(103);
  DatasetLoader serial(ds, DatasetLoaderOptions(10).seed(5).num_workers(0).transform(noisy()));
  DatasetLoader threaded(ds, DatasetLoaderOptions(10).seed(5).num_workers(3).prefetch_factor(2).transform(noisy()));
  const auto a = epoch(serial, 2), b = epoch(threaded, 2);
  expect_same(a, b);
  EXPECT_EQ(a.size(), 11u);
  EXPECT_EQ(a.back().num_samples(), 3);
  at::Tensor all;
  for (const auto& x : a) all = all.defined() ? at::cat({all, x.target()}) : x.target();
  EXPECT_TRUE(std::get<0>(all.sort()).equal(at::arange(103)));
}

TEST(DatasetLoaderTest, EpochsReshuffleDeterministically) {
  auto ds = numbered(50);
  DatasetLoader a(ds, DatasetLoaderOptions(10).seed(1)), b(ds, DatasetLoaderOptions(10).seed(1));
  expect_same(epoch(a, 3), epoch(b, 3));
  EXPECT_FALSE(epoch(a, 0)[0].target().equal(epoch(a, 1)[0].target()));
}

TEST(DatasetLoaderTest, SkipResumesMidEpochAtTheSamePosition) {
  auto ds = numbered(64);
  DatasetLoader l(ds, DatasetLoaderOptions(8).seed(9).num_workers(2).transform(noisy()));
  const auto full = epoch(l, 4);
  const auto resumed = epoch(l, 4, /*skip=*/5);
  ASSERT_EQ(resumed.size(), 3u);
  expect_same(std::vector<Batch>(full.begin() + 5, full.end()), resumed);
  EXPECT_EQ(l.position(), (std::pair<int64_t, int64_t>{4, 8}));
}

TEST(DatasetLoaderTest, DistributedRanksReadDisjointShards) {
  auto ds = numbered(40);
  std::vector<int64_t> seen;
  for (int64_t rank = 0; rank < 4; ++rank) {
    DatasetLoader l(ds, DatasetLoaderOptions(3).seed(2).num_replicas(4).rank(rank));
    EXPECT_EQ(*l.length(), 4);
    for (const auto& b : epoch(l, 1))
      for (int64_t i = 0; i < b.num_samples(); ++i) seen.push_back(b.target()[i].item<int64_t>());
  }
  std::sort(seen.begin(), seen.end());
  ASSERT_EQ(seen.size(), 40u);
  for (int64_t i = 0; i < 40; ++i) EXPECT_EQ(seen[static_cast<size_t>(i)], i);
}

TEST(DatasetLoaderTest, DropLastAndErrors) {
  auto ds = numbered(25);
  DatasetLoader l(ds, DatasetLoaderOptions(10).drop_last(true));
  EXPECT_EQ(*l.length(), 2);
  EXPECT_EQ(epoch(l, 0).size(), 2u);
  EXPECT_THROW(DatasetLoader(ds, DatasetLoaderOptions(0)), std::invalid_argument);
  EXPECT_THROW(DatasetLoader(ds, DatasetLoaderOptions(4).num_replicas(2).rank(5)), std::invalid_argument);
  // A transform that throws surfaces in next(), not as a hang.
  DatasetLoader bad(ds, DatasetLoaderOptions(5).num_workers(2).transform(
                            [](Batch, at::Generator&) -> Batch { throw std::runtime_error("bad sample"); }));
  EXPECT_THROW(bad.next(), std::runtime_error);
}

TEST(TransformsTest, CropFlipNormalize) {
  auto gen = at::detail::createCPUGenerator(0);
  const at::Tensor img = at::arange(16).reshape({1, 1, 4, 4}).to(at::kByte);
  const at::Tensor n = normalize_images(img, {0.5}, {0.25});
  EXPECT_NEAR(n[0][0][0][1].item<float>(), (1.0 / 255 - 0.5) / 0.25, 1e-6);
  const at::Tensor c = random_crop(img.repeat({8, 1, 1, 1}), 4, 2, gen);
  EXPECT_EQ(c.sizes(), (std::vector<int64_t>{8, 1, 4, 4}));
  const at::Tensor f = random_horizontal_flip(img.repeat({64, 1, 1, 1}), 0.5, gen);
  const auto flipped = f.select(3, 0).eq(3).sum().item<int64_t>();  // first column holds 3 when flipped
  EXPECT_GT(flipped, 0);
  EXPECT_LT(flipped, 64);
}

}  // namespace
}  // namespace composer
