// Resume equivalence with real processes: a run killed with SIGKILL at several points (one of them in the middle
// of writing a checkpoint) and restarted with autoresume ends with bitwise the same weights, and logs the same
// losses, as the same run left alone.
#include "support/process.h"
#include "support/run_files.h"
#include "support/scoped_env.h"
#include "support/test_support.h"

#include <torch/serialize.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

namespace composer {
namespace {

namespace fs = std::filesystem;
constexpr int64_t kBatches = 40;  // 32 batches per epoch: the run crosses an epoch boundary

std::map<int64_t, double> read_losses(const std::string& log) {
  std::map<int64_t, double> losses;
  std::ifstream in(log);
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j["type"] == "metrics" && j["data"].contains("loss/train/total")) {
      const int64_t step = j["step"];
      const double v = j["data"]["loss/train/total"];
      auto [it, fresh] = losses.emplace(step, v);
      EXPECT_TRUE(fresh || it->second == v) << "step " << step << " logged twice with different losses";
    }
  }
  return losses;
}

struct ResumeTest : ::testing::Test {
  fs::path dir = fs::temp_directory_path() / ("composer_resume_" + std::to_string(::getpid()));
  void SetUp() override { fs::create_directories(dir); }
  void TearDown() override { fs::remove_all(dir); }
  std::vector<std::string> args(const fs::path& folder, const std::string& log) {
    return {RESUME_WORKER, folder.string(), (dir / log).string(), std::to_string(kBatches)};
  }
};

struct ResumeTestBothWays : ResumeTest, ::testing::WithParamInterface<bool> {};

// The same with checkpoints written synchronously and in the background (save_async): a kill while the thread
// writes leaves a temporary file, never a checkpoint, and the latest link only ever names complete ones.
TEST_P(ResumeTestBothWays, SigkillAtAnyPointThenAutoresumeIsBitwiseIdentical) {
  testing::ScopedEnv env;
  env.set("RESUME_WORKER_SAVE_ASYNC", GetParam() ? "1" : "0");
  // The reference: one uninterrupted run.
  const fs::path ref = dir / "ref";
  {
    testing::ChildProcess p(args(ref, "ref.jsonl"));
    std::string line;
    while (p.read_line(line)) {
    }
    ASSERT_EQ(p.wait(), 0);
  }
  // The same run, killed three times: after batch 5, in the middle of a checkpoint write, after batch 27.
  const fs::path run = dir / "run";
  int attempt = 0;
  auto kill_after_batch = [&](int64_t batch) {
    testing::ChildProcess p(args(run, "run" + std::to_string(attempt++) + ".jsonl"));
    std::string line;
    while (p.read_line(line))
      if (line == "batch " + std::to_string(batch)) break;
    ASSERT_EQ(line, "batch " + std::to_string(batch));
    p.kill_now();
    EXPECT_EQ(p.wait(), 128 + SIGKILL);
  };
  kill_after_batch(5);
  bool killed_mid_save = false;
  for (int tries = 0; tries < 5 && !killed_mid_save; ++tries) {
    testing::ChildProcess p(args(run, "run" + std::to_string(attempt++) + ".jsonl"));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline && !testing::has_temp_file(run))
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    p.kill_now();
    p.wait();
    killed_mid_save = testing::has_temp_file(run);  // the half-written temporary file is still there
  }
  EXPECT_TRUE(killed_mid_save) << "never caught the worker inside a checkpoint write";
  kill_after_batch(27);
  {
    testing::ChildProcess p(args(run, "run" + std::to_string(attempt++) + ".jsonl"));
    std::string line, last;
    while (p.read_line(line)) last = line;
    ASSERT_EQ(p.wait(), 0);
    EXPECT_EQ(last, "DONE");
  }
  EXPECT_FALSE(testing::has_temp_file(run));  // stale temporary files were cleaned at the next start

  const auto a = testing::read_pickled_tensors(ref / "final-weights.pt"),
             b = testing::read_pickled_tensors(run / "final-weights.pt");
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, t] : a) EXPECT_TRUE(torch::equal(t, b.at(name))) << name;

  const auto ref_losses = read_losses((dir / "ref.jsonl").string());
  std::map<int64_t, double> resumed;
  for (int i = 0; i < attempt; ++i) {
    for (const auto& [step, v] : read_losses((dir / ("run" + std::to_string(i) + ".jsonl")).string())) {
      auto [it, fresh] = resumed.emplace(step, v);
      EXPECT_EQ(it->second, v) << "step " << step << " differs between attempts";
    }
  }
  ASSERT_EQ(ref_losses.size(), static_cast<size_t>(kBatches));
  ASSERT_EQ(resumed.size(), ref_losses.size());
  for (const auto& [step, v] : ref_losses) EXPECT_EQ(resumed.at(step), v) << "loss at step " << step;

  // Retention kept the newest 3 checkpoints, and the latest link points at the newest.
  int checkpoints = 0;
  for (const auto& e : fs::directory_iterator(run))
    if (e.path().extension() == ".pt" && e.path().filename().string().rfind("ep", 0) == 0) ++checkpoints;
  EXPECT_EQ(checkpoints, 3);
  EXPECT_EQ(fs::read_symlink(run / "latest-rank0.pt").string(), "ep1-ba40-rank0.pt");
}

INSTANTIATE_TEST_SUITE_P(SyncAndAsync, ResumeTestBothWays, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) { return info.param ? "async" : "sync"; });

}  // namespace
}  // namespace composer
