#include "support/test_support.h"

#include <gtest/gtest.h>

namespace composer {
namespace {

TEST(BatchTest, PositionsAndNames) {
  Batch b(at::ones({4, 3}), at::zeros({4}, at::kLong));
  EXPECT_EQ(b.keys(), (std::vector<std::string>{"input", "target"}));
  EXPECT_TRUE(b.at(int64_t{0}).equal(b.at(std::string("input"))));
  EXPECT_EQ(b.num_samples(), 4);
  EXPECT_EQ(b.num_tokens(), 0);
  b.set(std::string("weights"), at::ones({4}));
  EXPECT_EQ(b.size(), 3u);
  try {
    b.at(std::string("labels"));
    FAIL();
  } catch (const std::out_of_range& e) {
    EXPECT_NE(std::string(e.what()).find("'labels'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("input, target, weights"), std::string::npos);
  }
  EXPECT_THROW(b.at(int64_t{5}), std::out_of_range);
}

TEST(BatchTest, LanguageBatchCountsTokens) {
  Batch b({{"input_ids", at::zeros({2, 16}, at::kLong)}, {"labels", at::zeros({2, 16}, at::kLong)}});
  EXPECT_EQ(b.num_samples(), 2);
  EXPECT_EQ(b.num_tokens(), 32);
}

TEST(BatchTest, SplitIntoMicrobatches) {
  Batch b(at::arange(10).reshape({10, 1}), at::arange(10));
  const auto parts = b.split(4);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0].num_samples(), 4);
  EXPECT_EQ(parts[2].num_samples(), 2);
  EXPECT_EQ(parts[2].target()[1].item<int64_t>(), 9);
  EXPECT_THROW(b.split(0), std::invalid_argument);
}

TEST(BatchTest, DisagreeingSampleCountsAreAnError) {
  Batch b(at::ones({4, 3}), at::zeros({5}, at::kLong));
  EXPECT_THROW(b.num_samples(), std::invalid_argument);
}

TEST(TensorDataLoaderTest, ShuffleIsSeededPerEpoch) {
  const Batch data(at::arange(20).reshape({20, 1}).to(at::kFloat), at::arange(20));
  TensorDataLoader a(data, TensorDataLoaderOptions(5).shuffle(true).seed(3));
  TensorDataLoader b(data, TensorDataLoaderOptions(5).shuffle(true).seed(3));
  auto epoch_targets = [](TensorDataLoader& l, int64_t epoch) {
    l.set_epoch(epoch);
    l.reset();
    std::vector<at::Tensor> out;
    while (auto batch = l.next()) out.push_back(batch->target());
    return at::cat(out);
  };
  const at::Tensor e0 = epoch_targets(a, 0);
  EXPECT_TRUE(e0.equal(epoch_targets(b, 0)));
  EXPECT_FALSE(e0.equal(epoch_targets(a, 1)));
  EXPECT_TRUE(std::get<0>(e0.sort()).equal(at::arange(20)));  // a permutation
}

TEST(TensorDataLoaderTest, LengthDropLastAndSkip) {
  const Batch data(at::arange(10).reshape({10, 1}).to(at::kFloat), at::arange(10));
  TensorDataLoader keep(data, TensorDataLoaderOptions(4));
  TensorDataLoader drop(data, TensorDataLoaderOptions(4).drop_last(true));
  EXPECT_EQ(*keep.length(), 3);
  EXPECT_EQ(*drop.length(), 2);
  keep.reset();
  keep.skip(2);
  auto last = keep.next();
  ASSERT_TRUE(last);
  EXPECT_EQ(last->num_samples(), 2);
  EXPECT_FALSE(keep.next());
}

TEST(TensorDataLoaderTest, DistributedShardsAreDisjointAndCover) {
  const Batch data(at::arange(10).reshape({10, 1}).to(at::kFloat), at::arange(10));
  std::vector<int64_t> seen;
  for (int64_t rank = 0; rank < 2; ++rank) {
    TensorDataLoader l(data, TensorDataLoaderOptions(3).shuffle(true).seed(1).num_replicas(2).rank(rank));
    EXPECT_TRUE(l.is_distributed());
    l.reset();
    while (auto b = l.next())
      for (int64_t i = 0; i < b->num_samples(); ++i) seen.push_back(b->target()[i].item<int64_t>());
  }
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
}

TEST(TensorDataLoaderTest, BadOptionsNameTheField) {
  const Batch data(at::ones({4, 1}), at::zeros({4}, at::kLong));
  try {
    TensorDataLoader l(data, TensorDataLoaderOptions(0));
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("batch_size"), std::string::npos);
  }
  EXPECT_THROW(TensorDataLoader(data, TensorDataLoaderOptions(2).num_replicas(2).rank(2)), std::invalid_argument);
}

}  // namespace
}  // namespace composer
