// A 2-rank job (composer-cpp launch -n 2 over Gloo) SIGKILLed at random moments, once while rank 0 writes a
// checkpoint, and restarted with autoresume each time, ends bitwise equal to the same job left alone, with equal
// losses at every step. Dropout makes each rank's RNG matter: each rank must get its own state back.
#include "support/process.h"
#include "support/run_files.h"

#include <torch/serialize.h>
#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <thread>

namespace composer {
namespace {

namespace fs = std::filesystem;
constexpr int64_t kBatches = 40;

std::map<int64_t, double> losses_in(const fs::path& log) {
  std::map<int64_t, double> out;
  std::ifstream in(log);
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j["type"] == "metrics" && j["data"].contains("loss/train/total"))
      out[j["step"].get<int64_t>()] = j["data"]["loss/train/total"];
  }
  return out;
}

struct Job {
  fs::path folder, log;
  std::vector<std::string> argv() const {
    return {COMPOSER_CPP,
            "launch",
            "-n",
            "2",
            "--grace",
            "1",
            "--",
            RESUME_WORKER,
            folder.string(),
            log.string(),
            std::to_string(kBatches)};
  }
};

// Runs the job until `stop(line)` says so (or to the end), then SIGKILLs the launcher and both ranks at once.
// Returns the output; `finished` tells whether the job ran to its end.
std::string run_until(const Job& job, const std::function<bool(const std::string&)>& stop, bool& finished) {
  testing::ChildProcess launcher(job.argv());
  std::vector<pid_t> ranks;
  std::string line, out;
  finished = false;
  while (launcher.read_line(line, 120)) {
    out += line + "\n";
    const auto at = line.find("] pid ");
    if (at != std::string::npos) ranks.push_back(static_cast<pid_t>(std::stol(line.substr(at + 6))));
    if (line.find("[rank 0] DONE") != std::string::npos) finished = true;
    if (!finished && stop(line)) break;
  }
  if (!finished) {
    for (pid_t p : ranks) ::kill(p, SIGKILL);
    launcher.kill_now();
  }
  launcher.wait();
  return out;
}

TEST(Resume2RankTest, SigkilledAtRandomMomentsThenAutoresumeIsBitwiseIdentical) {
  const fs::path dir = fs::temp_directory_path() / ("composer_resume2_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  bool finished = false;
  const Job ref{dir / "ref", dir / "ref.jsonl"};
  const std::string ref_out = run_until(
      ref, [](const std::string&) { return false; }, finished);
  ASSERT_TRUE(finished) << ref_out;

  std::random_device rd;
  const unsigned seed = rd();
  std::mt19937 gen(seed);
  SCOPED_TRACE("kill points drawn with seed " + std::to_string(seed));
  std::vector<Job> attempts;
  auto next = [&] {
    attempts.push_back({dir / "run", dir / ("run" + std::to_string(attempts.size()) + ".jsonl")});
    return attempts.back();
  };
  // Random batches to kill after, increasing; and one kill while rank 0 writes a checkpoint.
  std::vector<int64_t> points{std::uniform_int_distribution<int64_t>(1, 12)(gen),
                              std::uniform_int_distribution<int64_t>(14, 36)(gen)};
  std::string out;
  out += run_until(
      next(), [&](const std::string& l) { return l == "[rank 1] batch " + std::to_string(points[0]); }, finished);
  ASSERT_FALSE(finished) << out;
  bool mid_save = false;
  for (int tries = 0; tries < 5 && !mid_save; ++tries) {
    const fs::path folder = dir / "run";
    out += run_until(
        next(),
        [&](const std::string& l) {
          if (l.find("batch ") == std::string::npos) return false;
          const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
          while (std::chrono::steady_clock::now() < deadline && !testing::has_temp_file(folder))
            std::this_thread::sleep_for(std::chrono::microseconds(100));
          return testing::has_temp_file(folder);
        },
        finished);
    mid_save = testing::has_temp_file(folder);
    ASSERT_FALSE(finished) << out;
  }
  EXPECT_TRUE(mid_save) << "never caught rank 0 inside a checkpoint write";
  out += run_until(
      next(), [&](const std::string& l) { return l == "[rank 0] batch " + std::to_string(points[1]); }, finished);
  out += run_until(
      next(), [](const std::string&) { return false; }, finished);
  ASSERT_TRUE(finished) << out;
  EXPECT_FALSE(testing::has_temp_file(dir / "run"));

  const auto a = testing::read_pickled_tensors(ref.folder / "final-weights.pt"),
             b = testing::read_pickled_tensors(dir / "run" / "final-weights.pt");
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, t] : a) EXPECT_TRUE(torch::equal(t, b.at(name))) << name;
  const auto ref_losses = losses_in(ref.log);
  ASSERT_EQ(ref_losses.size(), static_cast<size_t>(kBatches));
  std::map<int64_t, double> resumed;
  for (const auto& job : attempts) {
    for (const auto& [step, v] : losses_in(job.log)) {
      auto [it, fresh] = resumed.emplace(step, v);
      EXPECT_EQ(it->second, v) << "step " << step << " differs between attempts";
    }
  }
  ASSERT_EQ(resumed.size(), ref_losses.size()) << out;
  for (const auto& [step, v] : ref_losses) EXPECT_EQ(resumed.at(step), v) << "loss at step " << step;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace composer
