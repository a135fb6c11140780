// The launcher everyone already has: torchrun (from the project environment's PyTorch) starting composer-cpp
// ranks with its own environment (RANK, WORLD_SIZE, LOCAL_*, MASTER_*, TORCHELASTIC_*), including an elastic restart
// after a rank is killed, finished by autoresume.
#include "support/process.h"
#include "support/python.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

namespace composer {
namespace {

namespace fs = std::filesystem;

std::string torchrun() { return fs::path(testing::python()).parent_path().string() + "/torchrun"; }

std::vector<std::string> torchrun_argv(const std::string& config, std::vector<std::string> extra = {}) {
  std::vector<std::string> argv{
      torchrun(),      "--no-python", "--nproc-per-node", "2",
      "--master-addr", "127.0.0.1",   "--master-port",    std::to_string(testing::unused_port())};
  argv.insert(argv.end(), extra.begin(), extra.end());
  for (const char* a : {COMPOSER_CPP, "train"}) argv.emplace_back(a);
  argv.push_back(config);
  return argv;
}

// The pids of the processes whose parent is `parent` and whose command is composer-cpp.
std::vector<pid_t> composer_children(pid_t parent) {
  std::vector<pid_t> out;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    const auto close = line.rfind(')');
    const auto open = line.find('(');
    if (close == std::string::npos || open == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 2));
    char state;
    pid_t ppid = 0;
    rest >> state >> ppid;
    if (ppid == parent && line.substr(open + 1, close - open - 1) == "composer-cpp") out.push_back(std::stoi(name));
  }
  return out;
}

struct TorchrunTest : ::testing::Test {
  fs::path dir = fs::temp_directory_path() / ("composer_torchrun_" + std::to_string(::getpid()));
  void SetUp() override { fs::create_directories(dir); }
  void TearDown() override { fs::remove_all(dir); }
};

TEST_F(TorchrunTest, TrainsAConfigOnTwoRanks) {
  COMPOSER_REQUIRE_PYTHON("torch.distributed.run");
  const std::string cfg = (dir / "ddp.yaml").string();
  std::ofstream(cfg) << "model: {name: mlp, in_features: 64, hidden: [16]}\n"
                        "train_data: {dataset: synthetic_images, channels: 1, size: 8, num_samples: 256, batch_size: "
                        "16, num_workers: 0}\n"
                        "max_duration: 1ep\nprogress_bar: false\nrun_name: ddp\n";
  testing::ChildProcess p(torchrun_argv(cfg));
  std::string line, all;
  while (p.read_line(line, 120)) all += line + "\n";
  ASSERT_EQ(p.wait(), 0) << all;
  // 256 samples over 2 ranks at 16 per rank: 8 batches; only rank 0 reports.
  EXPECT_NE(all.find("composer-cpp: trained run 'ddp' to 1ep (8 batches)"), std::string::npos) << all;
}

// A rank SIGKILLed mid-run: torchrun (--max-restarts 1) restarts both ranks, autoresume picks rank 0's newest
// checkpoint for both, and the job ends at max_duration.
TEST_F(TorchrunTest, ElasticRestartAfterAKilledRankFinishesWithAutoresume) {
  COMPOSER_REQUIRE_PYTHON("torch.distributed.run");
  const fs::path ckpt = dir / "ckpt";
  const std::string cfg = (dir / "elastic.yaml").string();
  std::ofstream(cfg) << "model: {name: mlp, in_features: 784, hidden: [1024, 1024]}\n"
                        "train_data: {dataset: synthetic_images, channels: 1, size: 28, num_samples: 2048, batch_size: "
                        "32, num_workers: 0}\n"
                        "max_duration: 120ba\nprogress_bar: false\nrun_name: elastic\nautoresume: true\n"
                        "save_interval: 20ba\nsave_folder: "
                     << ckpt.string() << "\n";
  testing::ChildProcess p(torchrun_argv(cfg, {"--max-restarts", "1"}));
  // Wait for the first checkpoint, then kill one worker (a child of torchrun's agent).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (!fs::exists(ckpt / "ep0-ba20-rank0.pt") && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(fs::exists(ckpt / "ep0-ba20-rank0.pt"));
  const auto workers = composer_children(p.pid());
  ASSERT_EQ(workers.size(), 2u);
  ASSERT_FALSE(fs::exists(ckpt / "ep1-ba120-rank0.pt") || fs::exists(ckpt / "ep0-ba120-rank0.pt"))
      << "finished before the kill";
  ::kill(workers.back(), SIGKILL);
  std::string line, all;
  while (p.read_line(line, 240)) all += line + "\n";
  ASSERT_EQ(p.wait(), 0) << all;
  EXPECT_NE(all.find("autoresume: resumed run 'elastic' from"), std::string::npos) << all;
  EXPECT_NE(all.find("composer-cpp: trained run 'elastic' to 120ba (120 batches)"), std::string::npos) << all;
  bool final_checkpoint = false;
  for (const auto& e : fs::directory_iterator(ckpt))
    final_checkpoint |= e.path().filename().string().find("-ba120-rank0.pt") != std::string::npos;
  EXPECT_TRUE(final_checkpoint);
}

}  // namespace
}  // namespace composer
