// Algorithms inside the Trainer: surgery keeps a user optimizer in step, loader transforms need a DatasetLoader,
// sample-wise ColOut, StochasticDepth's warmup.
#include "algorithms/algo_support.h"
#include "support/errors.h"

#include <gtest/gtest.h>

using namespace composer;
using composer::testing::tiny_convnet;
using composer::testing::tiny_image_loader;

TEST(AlgorithmTrainerTest, SurgeryAtInitUpdatesTheUserOptimizer) {
  auto model = ComposerClassifier::wrap(tiny_convnet());
  auto opt =
      std::make_shared<optim::DecoupledSGDW>(model->parameters(), optim::DecoupledSGDWOptions(0.1).momentum(0.9));
  Trainer trainer(
      composer::testing::quiet_options(model)
          .train_dataloader(tiny_image_loader())
          .optimizer(opt)
          .max_duration(Time::from_batch(2))
          .algorithms({algorithms::make_algorithm("squeeze_excite", {{"min_channels", "16"}, {"latent_channels", "4"}}),
                       algorithms::make_algorithm("factorize", {{"min_channels", "4"}, {"latent_channels", "2"}})}));
  const auto params = model->parameters();
  const auto& in_opt = opt->param_groups().at(0).params();
  ASSERT_EQ(in_opt.size(), params.size());
  for (const auto& p : params) {
    EXPECT_TRUE(std::any_of(in_opt.begin(), in_opt.end(), [&](const at::Tensor& q) { return q.is_same(p); }));
  }
  const at::Tensor se_weight = model->named_parameters()["module.3.se.pool_and_mlp.2.weight"].detach().clone();
  trainer.fit();
  EXPECT_FALSE(torch::equal(se_weight, model->named_parameters()["module.3.se.pool_and_mlp.2.weight"]));  // trained
}

TEST(AlgorithmTrainerTest, LoaderTransformsNeedADatasetLoader) {
  auto data = composer::testing::tiny_images(64);
  auto loader = std::make_shared<TensorDataLoader>(data->data(), TensorDataLoaderOptions(32));
  auto model = ComposerClassifier::wrap(tiny_convnet());
  Trainer trainer(composer::testing::quiet_options(model)
                      .train_dataloader(loader)
                      .max_duration(Time::from_batch(1))
                      .algorithms({algorithms::make_algorithm("augmix")}));
  try {
    trainer.fit();
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("AugMix: the training dataloader is a TensorDataLoader"), std::string::npos)
        << e.what();
  }
}

TEST(AlgorithmTrainerTest, SampleWiseColOutCropsEachImageInTheLoader) {
  auto loader = std::make_shared<DatasetLoader>(composer::testing::tiny_images(64),
                                                DatasetLoaderOptions(32).shuffle(false).num_workers(0));
  State state;
  Logger logger(state);
  state.train_dataloader = loader;
  algorithms::ColOut colout(algorithms::ColOutOptions().batch(false).p_row(0.25).p_col(0.5));
  ASSERT_TRUE(colout.match(Event::FIT_START, state));
  EXPECT_FALSE(colout.match(Event::AFTER_DATALOADER, state));
  colout.apply(Event::FIT_START, state, logger);
  EXPECT_FALSE(colout.match(Event::FIT_START, state));  // a second fit() does not stack a second crop
  loader->set_epoch(0);
  loader->reset();
  const Batch b = *loader->next();
  EXPECT_EQ(b.input().sizes(), (std::vector<int64_t>{32, 3, 12, 8}));
  EXPECT_EQ(b.input().scalar_type(), at::kByte);
}

TEST(AlgorithmTrainerTest, StochasticDepthWarmupRampsTheRates) {
  auto net = models::resnet(50, 10);
  auto model = ComposerClassifier::wrap(net);
  auto sd = std::make_shared<algorithms::StochasticDepth>(
      algorithms::StochasticDepthOptions().drop_rate(0.4).drop_warmup(0.5));
  State state;
  Logger logger(state);
  state.model = model;
  state.max_duration = Time::from_batch(100);
  sd->apply(Event::INIT, state, logger);
  auto* last = dynamic_cast<nn::StochasticBlock*>(net->child("layer4").as<nn::Sequential>()->child_ptr("2").get());
  ASSERT_NE(last, nullptr);
  EXPECT_DOUBLE_EQ(last->drop_rate, 0.4);  // Composer: the full rate at INIT
  state.timestamp.batch = 0;
  ASSERT_TRUE(sd->match(Event::BATCH_START, state));
  sd->apply(Event::BATCH_START, state, logger);
  EXPECT_DOUBLE_EQ(last->drop_rate, 0.0);  // the ramp starts at 0
  state.timestamp.batch = 25;              // a quarter of training: half of the warmup
  sd->apply(Event::BATCH_START, state, logger);
  EXPECT_NEAR(last->drop_rate, 0.2, 1e-12);
  state.timestamp.batch = 49;
  sd->apply(Event::BATCH_START, state, logger);
  EXPECT_NEAR(last->drop_rate, 0.4 * 0.49 / 0.5, 1e-12);
  // After the warmup Composer no longer updates the blocks: they keep the last ramped rate.
  state.timestamp.batch = 80;
  sd->apply(Event::BATCH_START, state, logger);
  EXPECT_NEAR(last->drop_rate, 0.4 * 0.49 / 0.5, 1e-12);
}

// A tiny GPT on 8-row batches of 32 tokens for `batches` batches, warming up from 8 to 32 tokens in steps of 8 over
// the whole run.
TrainerOptions warmup_8_to_32(int64_t batches) {
  return composer::testing::quiet_options(composer::testing::tiny_gpt())
      .train_dataloader(composer::testing::tiny_token_loader(8, 32))
      .max_duration(Time::from_batch(batches))
      .algorithms({algorithms::make_algorithm(
          "seq_length_warmup",
          {{"min_seq_length", "8"}, {"max_seq_length", "32"}, {"step_size", "8"}, {"duration", "1"}})});
}

// The timestamp counts the tokens the loader gave, before AFTER_DATALOADER shortens them (Composer counts them
// there too): 4 batches of 8 rows of 32, trained at lengths 8, 16, 24, 32.
TEST(SeqLengthWarmupTest, TheTimestampCountsTheLoadersTokensAsComposerDoes) {
  Trainer trainer(warmup_8_to_32(4));
  trainer.fit();
  EXPECT_EQ(trainer.state().timestamp.token, 8 * 32 * 4);
  EXPECT_EQ(trainer.state().timestamp.sample, 32);
  EXPECT_TRUE(std::isfinite(trainer.state().total_loss_dict.at("loss/train/total")));
}

TEST(SeqLengthWarmupTest, BadBatchesAndDurationsAreNamed) {
  const auto& expect_error = composer::testing::expect_error_containing;
  expect_error(
      [] {
        algorithms::make_algorithm("seq_length_warmup", {{"max_seq_length", "4"}});
      },
      "max_seq_length 4 must be >= min_seq_length 8");
  expect_error([] { algorithms::make_algorithm("seq_length_warmup", {{"duration", "1.5"}}); }, "duration");
  expect_error(
      [] {
        Trainer t(composer::testing::quiet_options(ComposerClassifier::wrap(tiny_convnet()))
                      .train_dataloader(tiny_image_loader())
                      .max_duration(Time::from_batch(1))
                      .algorithms({algorithms::make_algorithm("seq_length_warmup")}));
        t.fit();
      },
      "needs token batches with an 'input_ids' field");
  // Fewer warmup batches (2) than length steps (8 -> 32 in steps of 8: 3): Composer divides by zero.
  expect_error(
      [] {
        Trainer t(warmup_8_to_32(2));
        t.fit();
      },
      "is 2 warmup batches, fewer than the 3 length steps from min_seq_length 8 to max_seq_length 32 in steps of 8");
  Batch images(torch::zeros({2, 3, 4, 4}), torch::zeros({2}, torch::kLong));
  expect_error([&] { functional::set_batch_sequence_length(images, 2); }, "'target' has shape [2]");
  expect_error([&] { functional::set_batch_sequence_length(images, 2, /*truncate=*/false); }, "needs an 'input_ids'");
}
