#include "support/test_support.h"

#include <c10/core/CPUAllocator.h>
#include <torch/serialize.h>

#include <gtest/gtest.h>

namespace composer {
namespace {

TEST(StateTest, ElapsedDurationAndStopTraining) {
  State s;
  EXPECT_FALSE(s.get_elapsed_duration().has_value());
  s.max_duration = Time(4, TimeUnit::EPOCH);
  s.timestamp = Timestamp().to_next_batch(8).to_next_epoch().to_next_batch(8);
  EXPECT_DOUBLE_EQ(*s.get_elapsed_duration(), 0.25);
  s.stop_training();
  EXPECT_EQ(*s.max_duration, Time(2, TimeUnit::BATCH));  // epochs become the current batch count
  s.max_duration = Time(100, TimeUnit::SAMPLE);
  s.stop_training();
  EXPECT_EQ(*s.max_duration, Time(16, TimeUnit::SAMPLE));
}

TEST(StateTest, SetDataloaderClampsLength) {
  State s;
  TensorDataLoader loader(testing::make_blobs(10), TensorDataLoaderOptions(3));
  s.set_dataloader(&loader, "train");
  EXPECT_EQ(*s.dataloader_len, 4);
  s.set_dataloader(&loader, "train", 2);
  EXPECT_EQ(*s.dataloader_len, 2);
  s.set_dataloader(&loader, "train", 99);
  EXPECT_EQ(*s.dataloader_len, 4);
  EXPECT_EQ(s.dataloader_label, "train");
}

// Everything state_dict(State) writes survives torch::pickle_save / pickle_load (the checkpoint format).
TEST(StateTest, StateDictRoundTripsThroughPickle) {
  auto model = testing::make_classifier(8, 16, 4, /*seed=*/3);
  auto data = testing::make_blobs(32);
  auto loader = testing::make_loader(data, 8);
  auto adam = std::make_shared<optim::DecoupledAdamW>(model->parameters(), optim::DecoupledAdamWOptions(1e-2));
  Trainer trainer(
      testing::quiet_options(model).train_dataloader(loader).max_duration("3ba").optimizer(adam).run_name("rt"));
  trainer.fit();
  const std::vector<char> bytes = torch::pickle_save(state_dict(trainer.state()));

  auto model2 = testing::make_classifier(8, 16, 4, /*seed=*/99);
  auto adam2 = std::make_shared<optim::DecoupledAdamW>(model2->parameters(), optim::DecoupledAdamWOptions(5.0));
  Trainer other(
      testing::quiet_options(model2).train_dataloader(loader).max_duration("6ba").optimizer(adam2).run_name("x"));
  load_state_dict(other.state(), torch::pickle_load(bytes));

  EXPECT_EQ(other.state().timestamp, trainer.state().timestamp);
  EXPECT_EQ(other.state().run_name, "rt");
  EXPECT_EQ(other.state().rank_zero_seed, 42u);
  const auto p1 = model->named_parameters(), p2 = model2->named_parameters();
  for (const auto& kv : p1) EXPECT_TRUE(torch::equal(kv.value(), p2[kv.key()])) << kv.key();
  EXPECT_EQ(adam2->param_groups()[0].options().get_lr(), adam->param_groups()[0].options().get_lr());

  // Continuing both from the same state gives the same weights: optimizer moments were restored too.
  trainer.fit(Time(2, TimeUnit::BATCH));
  other.fit(Time(2, TimeUnit::BATCH));
  for (const auto& kv : p1) EXPECT_TRUE(torch::allclose(kv.value(), p2[kv.key()], 0, 0)) << kv.key();
}

TEST(StateTest, StrictModelLoadNamesMissingKeys) {
  auto model = testing::make_classifier(8, 16, 4);
  State s;
  s.model = model;
  Dict bad = new_dict();
  Dict weights(c10::StringType::get(), c10::TensorType::get());
  weights.insert("module.0.weight", at::zeros({16, 8}));
  bad.insert("model", weights);
  try {
    load_state_dict(s, bad, /*strict_model=*/true);
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("module.2.weight"), std::string::npos) << e.what();
  }
  Dict wrong_shape = new_dict();
  Dict w2(c10::StringType::get(), c10::TensorType::get());
  w2.insert("module.0.weight", at::zeros({3, 3}));
  wrong_shape.insert("model", w2);
  EXPECT_THROW(load_state_dict(s, wrong_shape, /*strict_model=*/false), std::invalid_argument);
}

}  // namespace
}  // namespace composer

namespace composer {
namespace {

TEST(AllocatorTest, TunesGlibcUnlessTheUserConfiguredIt) {
#if defined(__GLIBC__)
  if (std::getenv("GLIBC_TUNABLES") == nullptr) {
    EXPECT_TRUE(tune_allocator());
  }
  ::setenv("MALLOC_ARENA_MAX", "2", 1);  // an explicit user setting wins
  EXPECT_FALSE(tune_allocator());
  ::unsetenv("MALLOC_ARENA_MAX");
#else
  EXPECT_FALSE(tune_allocator());
#endif
}

TEST(CpuBlockCacheTest, ReusesLargeBlocksWithinThePeakAndGivesThemBack) {
  constexpr int64_t kMiB = int64_t{1} << 20;
  auto floats = [](int64_t mib) { return at::empty({mib * kMiB / 4}, at::kFloat); };
  EXPECT_TRUE(install_cpu_block_cache());
  ASSERT_TRUE(cpu_block_cache_installed());
  EXPECT_FALSE(install_cpu_block_cache());  // once per process
  { at::Tensor unheld = floats(100); }      // while no one holds the cache, a freed block goes back at once
  EXPECT_EQ(cpu_block_cache_stats().cached_bytes, 0);
  std::shared_ptr<void> hold = hold_cpu_block_cache();
  const CpuBlockCacheStats start = cpu_block_cache_stats();
  void* first = nullptr;
  {
    at::Tensor a = floats(100);
    a.fill_(1);
    first = a.data_ptr();
    EXPECT_EQ(cpu_block_cache_stats().live_bytes, start.live_bytes + 100 * kMiB);
  }
  CpuBlockCacheStats s = cpu_block_cache_stats();
  EXPECT_EQ(s.cached_bytes, 100 * kMiB);  // freed, kept
  EXPECT_EQ(s.live_bytes, start.live_bytes);
  {
    at::Tensor b = floats(90);  // at most 1/8 smaller than the cached block: the same memory
    EXPECT_EQ(b.data_ptr(), first);
    b.fill_(2);
    EXPECT_EQ(b.sum().item<double>(), 2.0 * 90 * kMiB / 4);
    EXPECT_EQ(cpu_block_cache_stats().hits, s.hits + 1);
  }
  {
    at::Tensor small = floats(8);  // below kCpuBlockCacheMinBytes: the allocator below
    EXPECT_EQ(cpu_block_cache_stats().live_bytes, start.live_bytes);
    at::Tensor c = floats(70);  // more than 1/8 smaller than the cached block: a new one, and as live + cached
                                // would pass the peak (100 MiB), the cached block goes back to the OS first
    s = cpu_block_cache_stats();
    EXPECT_EQ(s.live_bytes, start.live_bytes + 70 * kMiB);
    EXPECT_EQ(s.cached_bytes, 0);
  }
  {
    at::Tensor d = floats(200);  // a new peak: the cached 70 MiB block goes back first
    s = cpu_block_cache_stats();
    EXPECT_EQ(s.cached_bytes, 0);
    EXPECT_EQ(s.live_bytes, start.live_bytes + 200 * kMiB);
    EXPECT_EQ(s.peak_bytes, s.live_bytes);
  }
  void* raw = c10::GetCPUAllocator()->raw_allocate(70 * kMiB);  // LibTorch's raw path gives blocks back too
  c10::GetCPUAllocator()->raw_deallocate(raw);
  s = cpu_block_cache_stats();
  EXPECT_EQ(s.cached_bytes, 70 * kMiB);  // the 200 MiB block made room for it (within the peak)
  EXPECT_LE(s.live_bytes + s.cached_bytes, s.peak_bytes);
  release_cpu_block_cache();
  s = cpu_block_cache_stats();
  EXPECT_EQ(s.cached_bytes, 0);
  EXPECT_EQ(s.peak_bytes, s.live_bytes);
  { at::Tensor e = floats(100); }
  EXPECT_EQ(cpu_block_cache_stats().cached_bytes, 100 * kMiB);
  std::shared_ptr<void> second = hold_cpu_block_cache();
  hold.reset();  // another holder remains: the block stays
  EXPECT_EQ(cpu_block_cache_stats().cached_bytes, 100 * kMiB);
  second.reset();  // the last holder: everything goes back
  EXPECT_EQ(cpu_block_cache_stats().cached_bytes, 0);
}

}  // namespace
}  // namespace composer
