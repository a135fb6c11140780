// Data that does not split evenly over the ranks (real processes, composer-cpp launch): 129 samples on 2 ranks in
// batches of 64 give every rank the same batches, in training over 2 epochs and in evaluation, with drop_last false
// and true, under DDP and FULL_SHARD; and a user's loader that gives one rank more batches than the other ends each
// epoch on both ranks together, with a warning, instead of leaving one rank waiting for the other forever.
#include "support/data_paths.h"
#include "support/python.h"
#include "support/run_files.h"
#include "support/worker_run.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace composer {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> values(const std::string& output, const std::string& key) {
  return testing::printed_words(output, key + " ");
}

TEST(UnevenDataTest, StreamingDataOf129SamplesGivesBothRanksTheSameBatches) {
  COMPOSER_REQUIRE_PYTHON("streaming");
  COMPOSER_REQUIRE_DATA(testing::data_path("text/mobydick.txt"));
  const fs::path dir = testing::fresh_dir("uneven_streaming");
  const auto written = testing::run_python({testing::source_dir() + "/tests/data/mds_write.py", "text",
                                            (dir / "mds").string(), testing::data_path("text/mobydick.txt"), "129"});
  ASSERT_EQ(written.status, 0) << written.output;
  for (const std::string strategy : {"ddp", "full_shard"}) {
    for (const bool drop_last : {false, true}) {
      const std::string what = strategy + (drop_last ? ", drop_last" : "");
      const auto run = testing::run_worker(testing::launch_argv(
          COMPOSER_CPP, 2, {UNEVEN_DATA_WORKER, "streaming", (dir / "mds").string(), drop_last ? "1" : "0", strategy}));
      ASSERT_EQ(run.status, 0) << what << "\n" << run.output;
      EXPECT_EQ(testing::printed_words(run.output, "done").size(), 2u) << what;
      // Each rank: 65 samples an epoch (129 padded to 130): 64 + 1, or 64 with drop_last.
      const std::vector<std::string> batches(4, drop_last ? "1" : "2");
      std::vector<std::string> train_batches = values(run.output, "train_batches 0");
      const auto second = values(run.output, "train_batches 1");
      train_batches.insert(train_batches.end(), second.begin(), second.end());
      EXPECT_EQ(train_batches, batches) << what << "\n" << run.output;
      EXPECT_EQ(values(run.output, "train_samples 1"), std::vector<std::string>(2, drop_last ? "64" : "65")) << what;
      EXPECT_EQ(values(run.output, "eval_batches"), batches) << what;
      EXPECT_EQ(values(run.output, "eval_samples"), std::vector<std::string>(4, drop_last ? "64" : "65")) << what;
      EXPECT_EQ(run.output.find("warning: the"), std::string::npos) << what << "\n" << run.output;
    }
  }
}

TEST(UnevenDataTest, ALoaderWithMoreBatchesOnOneRankEndsTheEpochOnBothWithAWarning) {
  const auto run =
      testing::run_worker(testing::launch_argv(COMPOSER_CPP, 2, {UNEVEN_DATA_WORKER, "lopsided"}), /*timeout_s=*/90);
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_EQ(testing::printed_words(run.output, "done").size(), 2u) << run.output;
  EXPECT_EQ(values(run.output, "train_batches 0"), std::vector<std::string>(2, "2")) << run.output;
  EXPECT_EQ(values(run.output, "train_batches 1"), std::vector<std::string>(2, "2")) << run.output;
  EXPECT_NE(run.output.find("the train data gives the ranks different numbers of batches: 1 of 2 ranks have batch 3"),
            std::string::npos)
      << run.output;
}

}  // namespace
}  // namespace composer
