// Automatic microbatching over 2 real ranks (Gloo) where only one rank has a memory limit: the rank that runs out of
// memory and the rank that does not agree on every retry, neither waits forever, and the run equals a 2-rank run
// with the size found from the start.
#include "support/run_files.h"
#include "support/worker_run.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace composer {
namespace {

namespace fs = std::filesystem;
using testing::printed_values;
using testing::run_worker;

std::vector<std::string> launch2(const std::vector<std::string>& command) {
  std::vector<std::string> argv{COMPOSER_CPP, "launch", "-n", "2", "--"};
  argv.insert(argv.end(), command.begin(), command.end());
  return argv;
}

TEST(AutoMicrobatch2RankTest, OnlyOneRankRunsOutAndBothShrinkTogether) {
  const fs::path dir = fs::temp_directory_path() / ("composer_auto_mb2_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const auto automatic =
      run_worker(launch2({AUTO_MICROBATCH_WORKER, (dir / "auto.pt").string(), "auto", "512", "40", "1"}), 240);
  ASSERT_EQ(automatic.status, 0) << automatic.output;
  EXPECT_NE(automatic.output.find("[rank 1] limited to 40 MiB more"), std::string::npos) << automatic.output;
  EXPECT_EQ(automatic.output.find("[rank 0] limited"), std::string::npos) << automatic.output;
  const auto rank0 = printed_values(automatic.output, "train_microbatch ", "[rank 0] ");
  const auto rank1 = printed_values(automatic.output, "train_microbatch ", "[rank 1] ");
  ASSERT_EQ(rank0.size(), 4u) << automatic.output;
  EXPECT_EQ(rank0, rank1) << "the ranks must agree on the size";
  EXPECT_LT(rank0.front(), 4096) << automatic.output;

  const std::string size = std::to_string(static_cast<int64_t>(rank0.front()));
  const auto fixed =
      run_worker(launch2({AUTO_MICROBATCH_WORKER, (dir / "fixed.pt").string(), size, "512", "0", "-1"}), 240);
  ASSERT_EQ(fixed.status, 0) << fixed.output;
  const auto a = testing::read_pickled_tensors(dir / "auto.pt"), b = testing::read_pickled_tensors(dir / "fixed.pt");
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, t] : a) EXPECT_TRUE(t.equal(b.at(name))) << name;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace composer
