#include "support/test_support.h"

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

}  // namespace
}  // namespace composer
