// A Trainer over a StreamingDataset saved mid-epoch on 2 ranks and resumed from that checkpoint on 3 (real processes,
// composer-cpp launch): the samples trained on before the checkpoint and after the resume are the epoch's, each
// once (the resumed ranks continue the global order after the samples the 2 ranks consumed), but for the padding that
// gives each rank the same count.
#include "support/data_paths.h"
#include "support/python.h"
#include "support/run_files.h"
#include "support/worker_run.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <sstream>

namespace composer {
namespace {

namespace fs = std::filesystem;

/// The offsets after "seen " on the lines of `output`, and on how many lines each appeared.
std::map<int64_t, int> seen_offsets(const std::string& output) {
  std::map<int64_t, int> seen;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);) {
    const auto at = line.find("seen ");
    if (at != std::string::npos) ++seen[std::stoll(line.substr(at + 5))];
  }
  return seen;
}

TEST(StreamingResumeTest, SavedOnTwoRanksMidEpochResumedOnThreeSeesTheRestOnce) {
  COMPOSER_REQUIRE_PYTHON("streaming");
  COMPOSER_REQUIRE_DATA(testing::data_path("text/mobydick.txt"));
  const fs::path dir = testing::fresh_dir("streaming_resume");
  const auto written = testing::run_python({testing::source_dir() + "/tests/data/mds_write.py", "text",
                                            (dir / "mds").string(), testing::data_path("text/mobydick.txt"), "300"});
  ASSERT_EQ(written.status, 0) << written.output;
  const std::string ckpt = (dir / "ckpt").string();
  // 2 ranks x 8 samples: 5 batches (80 samples), then the checkpoint ep0-ba5.
  const auto first = testing::run_worker(
      testing::launch_argv(COMPOSER_CPP, 2, {STREAMING_RESUME_WORKER, (dir / "mds").string(), "5ba", ckpt}));
  ASSERT_EQ(first.status, 0) << first.output;
  const auto before = seen_offsets(first.output);
  ASSERT_EQ(before.size(), 80u) << first.output;
  // 3 ranks x 8 samples from that checkpoint to the end of the epoch: the other 220 samples, and 2 more so that each
  // rank gets 74 (MosaicML Streaming's padding): the global order's first 2, trained on before the checkpoint.
  const auto second = testing::run_worker(testing::launch_argv(
      COMPOSER_CPP, 3,
      {STREAMING_RESUME_WORKER, (dir / "mds").string(), "1ep", (dir / "ckpt2").string(), ckpt + "/ep0-ba5-rank0.pt"}));
  ASSERT_EQ(second.status, 0) << second.output;
  const auto after = seen_offsets(second.output);
  std::map<int64_t, int> all = before;
  for (const auto& [offset, n] : after) all[offset] += n;
  EXPECT_EQ(after.size(), 222u);
  ASSERT_EQ(all.size(), 300u);
  int twice = 0;
  for (int64_t i = 0; i < 300; ++i) {
    ASSERT_TRUE(all.count(i * 97)) << "sample " << i << " never trained on";
    const int n = all.at(i * 97);
    EXPECT_TRUE(n == 1 || (n == 2 && before.count(i * 97) && after.count(i * 97)))
        << "sample " << i << " trained on " << n << " times";
    twice += n == 2;
  }
  EXPECT_EQ(twice, 2);
}

}  // namespace
}  // namespace composer
