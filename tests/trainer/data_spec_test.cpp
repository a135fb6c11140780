// Composer's DataSpec hooks (data/data_spec.h) as the Trainer asks them: a split_batch that splits samples (a
// fractional device_train_microbatch_size), samples and tokens counted by the loader's rules, and the batch and
// microbatch transforms, each against a run that does not need them.
#include "composer/composer.h"
#include "support/errors.h"
#include "support/test_support.h"

#include <gtest/gtest.h>

namespace composer {
namespace {

// Each sample is two rows of the input (a "long sequence" in two halves): 8 samples are 16 rows.
int64_t rows_of(const Batch& b) { return b.input().size(0); }

DataSpecOptions two_rows_per_sample(int* microbatch_transforms = nullptr) {
  DataSpecOptions o;
  o.get_num_samples_in_batch([](const Batch& b) { return rows_of(b) / 2.0; });
  o.get_num_tokens_in_batch(
      [](const Batch& b, TokenType type) { return rows_of(b) * (type == TokenType::kTotal ? 5 : 3); });
  // Half a sample per microbatch is one row.
  o.split_batch([](const Batch& b, double size) { return b.split(static_cast<int64_t>(size * 2)); });
  if (microbatch_transforms) {
    o.microbatch_transforms([microbatch_transforms](Batch b) {
      ++*microbatch_transforms;
      return b;
    });
  }
  return o;
}

struct TrainedRun {
  std::vector<at::Tensor> weights;
  Timestamp timestamp;
};

TrainedRun train(const std::shared_ptr<DataLoader>& loader, MicrobatchSize microbatch) {
  auto model = testing::make_classifier(8, 16, 4, 3, at::kDouble);
  auto opt = std::make_shared<torch::optim::SGD>(model->parameters(), torch::optim::SGDOptions(0.1));
  Trainer trainer(testing::quiet_options(model)
                      .train_dataloader(loader)
                      .optimizer(opt)
                      .max_duration("3ba")
                      .device_train_microbatch_size(microbatch));
  trainer.fit();
  TrainedRun run;
  for (auto& p : model->parameters()) run.weights.push_back(p.detach().clone());
  run.timestamp = trainer.state().timestamp;
  return run;
}

std::shared_ptr<DataLoader> rows_loader() {
  return testing::make_loader(testing::make_blobs(96, 8, 4, 1, at::kDouble), 16);
}

// Half a sample per microbatch (16 one-row microbatches, each weighted 0.5 of 8 samples) reaches the weights of the
// whole batch, and time counts the loader's samples and tokens.
TEST(DataSpecTest, FractionalMicrobatchesSplitSamplesAsTheLoaderSays) {
  const TrainedRun whole = train(rows_loader(), MicrobatchSize());
  int transforms = 0;
  const TrainedRun halves =
      train(std::make_shared<DataSpec>(rows_loader(), two_rows_per_sample(&transforms)), MicrobatchSize::fraction(0.5));
  ASSERT_EQ(whole.weights.size(), halves.weights.size());
  for (size_t i = 0; i < whole.weights.size(); ++i)
    EXPECT_LT((whole.weights[i] - halves.weights[i]).abs().max().item<double>(), 1e-12) << "parameter " << i;
  EXPECT_EQ(transforms, 3 * 16);  // once per microbatch
  EXPECT_EQ(halves.timestamp.sample, 3 * 8);
  EXPECT_EQ(halves.timestamp.token, 3 * 16 * 5);
  EXPECT_EQ(whole.timestamp.sample, 3 * 16);
  EXPECT_EQ(whole.timestamp.token, 0);
}

TEST(DataSpecTest, TheDefaultSplitRefusesAFraction) {
  const std::string error = testing::any_error_of([] { train(rows_loader(), MicrobatchSize::fraction(0.5)); });
  EXPECT_NE(error.find("microbatch size 0.5 is a fraction of a sample"), std::string::npos) << error;
  EXPECT_NE(error.find("split_batch"), std::string::npos) << error;
}

// batch_transforms change the batch before the model and the counts see it (here: the first half of each batch).
TEST(DataSpecTest, BatchTransformsRunBeforeCountingAndTraining) {
  DataSpecOptions o;
  o.batch_transforms([](Batch b) {
    Batch half;
    for (const auto& [k, t] : b.fields()) half.set(k, t.narrow(0, 0, t.size(0) / 2));
    return half;
  });
  const TrainedRun run = train(std::make_shared<DataSpec>(rows_loader(), o), MicrobatchSize());
  EXPECT_EQ(run.timestamp.sample, 3 * 8);
}

// Token weighting asks the loader for its loss-generating tokens: with 3 per row (any rule the loader has), each
// one-row microbatch weighs the same as in a sample-weighted run.
TEST(DataSpecTest, TokenWeightingCountsTheLoadersLossGeneratingTokens) {
  const TrainedRun by_samples = train(rows_loader(), MicrobatchSize(1));
  auto model = testing::make_classifier(8, 16, 4, 3, at::kDouble);
  auto opt = std::make_shared<torch::optim::SGD>(model->parameters(), torch::optim::SGDOptions(0.1));
  Trainer trainer(testing::quiet_options(model)
                      .train_dataloader(std::make_shared<DataSpec>(rows_loader(), two_rows_per_sample()))
                      .optimizer(opt)
                      .max_duration("3ba")
                      .accumulate_train_batch_on_tokens(true)
                      .device_train_microbatch_size(MicrobatchSize::fraction(0.5)));
  trainer.fit();
  const auto params = model->parameters();
  for (size_t i = 0; i < params.size(); ++i)
    EXPECT_LT((params[i] - by_samples.weights[i]).abs().max().item<double>(), 1e-12) << "parameter " << i;
}

TEST(DataSpecTest, BadHooksAndSizesAreClearErrors) {
  EXPECT_NE(testing::any_error_of([] { DataSpec(nullptr); }).find("DataSpec: the dataloader is null"),
            std::string::npos);
  DataSpecOptions negative;
  negative.get_num_samples_in_batch([](const Batch&) { return -1.0; });
  const std::string error =
      testing::any_error_of([&] { train(std::make_shared<DataSpec>(rows_loader(), negative), MicrobatchSize()); });
  EXPECT_NE(error.find("get_num_samples_in_batch returned -1"), std::string::npos) << error;
  EXPECT_EQ(MicrobatchSize::parse("0.5").fractional, 0.5);
  EXPECT_EQ(MicrobatchSize::parse("4.0").value, 4);
  EXPECT_EQ(MicrobatchSize::parse("4").value, 4);
  for (const std::string bad : {"0", "-0.5", "abc", "0.0", "nan", "inf", ""}) {
    EXPECT_NE(testing::any_error_of([&] { MicrobatchSize::parse(bad); }).find("must be a positive number or 'auto'"),
              std::string::npos)
        << bad;
  }
}

}  // namespace
}  // namespace composer
