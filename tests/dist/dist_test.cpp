// Distributed data parallel with real processes over Gloo, started by composer-cpp launch.
#include "support/process.h"
#include "support/run_files.h"
#include "support/worker_run.h"

#include "composer/composer.h"
#include "composer/utils/compat.h"

#include <torch/serialize.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

namespace composer {
namespace {

namespace fs = std::filesystem;

using ProcessResult = testing::WorkerResult;
using testing::run_worker;

std::vector<std::string> launch(int n, std::vector<std::string> command, std::vector<std::string> extra = {}) {
  return testing::launch_argv(COMPOSER_CPP, n, command, extra);
}

struct DistTest : ::testing::Test {
  fs::path dir = fs::temp_directory_path() / ("composer_dist_" + std::to_string(::getpid()));
  void SetUp() override { fs::create_directories(dir); }
  void TearDown() override { fs::remove_all(dir); }
};

// 2 ranks with per-rank batch B equal 1 rank with batch 2B (fp64), with and without microbatching, even though the
// ranks start from different initial weights (the start-up broadcast makes them rank 0's).
TEST_F(DistTest, TwoRanksEqualOneRankWithTheGlobalBatch) {
  const std::string single = (dir / "single.pt").string();
  const ProcessResult one = run_worker({DDP_WORKER, "train", single, "0", "32"});
  ASSERT_EQ(one.status, 0) << one.output;
  for (const char* microbatch : {"0", "8"}) {
    const std::string out = (dir / (std::string("two-") + microbatch + ".pt")).string();
    const ProcessResult two = run_worker(launch(2, {DDP_WORKER, "train", out, microbatch, "32"}));
    ASSERT_EQ(two.status, 0) << two.output;
    EXPECT_NE(two.output.find("[rank 0] loss "), std::string::npos) << two.output;
    const auto a = testing::read_pickled_tensors(single), b = testing::read_pickled_tensors(out);
    ASSERT_EQ(a.size(), b.size());
    for (const auto& [name, t] : a)
      EXPECT_LT((t - b.at(name)).abs().max().item<double>(), 1e-10) << name << " microbatch " << microbatch;
  }
}

// accumulate_train_batch_on_tokens over ranks: 2 ranks holding different numbers of loss-generating tokens, in
// microbatches of 3, reach the weights of 1 process taking the global batch whole (Composer weighs by the global
// token count the same way).
TEST_F(DistTest, TokenWeightedRanksEqualOneProcessWithTheGlobalBatch) {
  const std::string single = (dir / "lm-single.pt").string(), two = (dir / "lm-two.pt").string();
  const ProcessResult one = run_worker({DDP_WORKER, "lm_tokens", single, "0", "16"});
  ASSERT_EQ(one.status, 0) << one.output;
  const ProcessResult r = run_worker(launch(2, {DDP_WORKER, "lm_tokens", two, "3", "16"}));
  ASSERT_EQ(r.status, 0) << r.output;
  const auto a = testing::read_pickled_tensors(single), b = testing::read_pickled_tensors(two);
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, t] : a) EXPECT_LT((t - b.at(name)).abs().max().item<double>(), 1e-10) << name;
}

// GradientClipping at AFTER_TRAIN_BATCH sees the gradients averaged over the ranks, so a clipped 2-rank run (with
// microbatches) equals a clipped 1-rank run with the global batch; the thresholds are small enough to clip.
TEST_F(DistTest, TwoRanksClipTheAveragedGradients) {
  const std::string plain = (dir / "plain.pt").string();
  ASSERT_EQ(run_worker({DDP_WORKER, "train", plain, "0", "32"}).status, 0);
  for (const char* clipping : {"norm:0.05", "adaptive:0.01"}) {
    const std::string single = (dir / (std::string("one-") + clipping + ".pt")).string();
    const std::string out = (dir / (std::string("two-") + clipping + ".pt")).string();
    const ProcessResult one = run_worker({DDP_WORKER, "train", single, "0", "32", clipping});
    ASSERT_EQ(one.status, 0) << one.output;
    const ProcessResult two = run_worker(launch(2, {DDP_WORKER, "train", out, "8", "32", clipping}));
    ASSERT_EQ(two.status, 0) << two.output;
    const auto a = testing::read_pickled_tensors(single), b = testing::read_pickled_tensors(out),
               unclipped = testing::read_pickled_tensors(plain);
    double clipped_moved = 0;
    for (const auto& [name, t] : a) {
      EXPECT_LT((t - b.at(name)).abs().max().item<double>(), 1e-10) << name << " " << clipping;
      clipped_moved = std::max(clipped_moved, (t - unclipped.at(name)).abs().max().item<double>());
    }
    EXPECT_GT(clipped_moved, 1e-3) << clipping << " did not clip";
  }
}

// SAM over 2 ranks (with microbatches): the ascent uses each rank's own gradient (Composer's closure(ddp_sync=False)),
// the descent the gradient averaged over the ranks, as a one-process replay of the two shards computes; a 1-rank run
// with the global batch ascends along the averaged gradient and so ends elsewhere.
TEST_F(DistTest, TwoRankSAMAscendsPerRankAndDescendsTogether) {
  const std::string reference = (dir / "sam-reference.pt").string();
  const ProcessResult ref = run_worker({DDP_WORKER, "sam_reference", reference, "32", "0.5"});
  ASSERT_EQ(ref.status, 0) << ref.output;
  const std::string single = (dir / "sam-one.pt").string();
  ASSERT_EQ(run_worker({DDP_WORKER, "train", single, "0", "32", "sam:0.5"}).status, 0);
  const std::string two = (dir / "sam-two.pt").string();
  const ProcessResult run = run_worker(launch(2, {DDP_WORKER, "train", two, "8", "32", "sam:0.5"}));
  ASSERT_EQ(run.status, 0) << run.output;
  const auto expected = testing::read_pickled_tensors(reference), got = testing::read_pickled_tensors(two),
             one_rank = testing::read_pickled_tensors(single);
  double differs_from_one_rank = 0;
  for (const auto& [name, t] : expected) {
    EXPECT_LT((t - got.at(name)).abs().max().item<double>(), 1e-10) << name;
    differs_from_one_rank = std::max(differs_from_one_rank, (t - one_rank.at(name)).abs().max().item<double>());
  }
  EXPECT_GT(differs_from_one_rank, 1e-6) << "the 2-rank ascent should use each rank's own gradient";
}

TEST_F(DistTest, BucketedAllReduceEqualsPlainAllReduce) {
  const ProcessResult r = run_worker(launch(2, {DDP_WORKER, "reducer"}));
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* rank : {"[rank 0] buckets ", "[rank 1] buckets "}) {
    const auto pos = r.output.find(rank);
    ASSERT_NE(pos, std::string::npos) << r.output;
    const auto diff_pos = r.output.find("max_diff ", pos);
    EXPECT_LT(std::stod(r.output.substr(diff_pos + 9)), 1e-12) << r.output;
    EXPECT_GT(std::stoi(r.output.substr(pos + std::strlen(rank))), 1) << "expected several buckets: " << r.output;
  }
}

// A list-state metric gathers every rank's rows in rank order, whatever each rank holds (3 and 5 pairs here), and
// computes what one process computes from all of them.
TEST_F(DistTest, ListStateMetricsGatherRowsOfEveryRank) {
  const ProcessResult r = run_worker(launch(2, {DDP_WORKER, "metric_rows"}));
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* rank : {"[rank 0] rows 8 same 1 auroc ", "[rank 1] rows 8 same 1 auroc "}) {
    const auto pos = r.output.find(rank);
    ASSERT_NE(pos, std::string::npos) << r.output;
    std::istringstream line(r.output.substr(pos + std::strlen(rank)));
    double gathered = 0, one = 0;
    std::string vs;
    line >> gathered >> vs >> one;
    EXPECT_EQ(gathered, one) << r.output;
    EXPECT_GT(gathered, 0.0) << r.output;
  }
}

// Subgroups (dist::new_group) run their collectives among their members only: 4 ranks in pairs {0,1}, {2,3} and
// across them {0,2}, {1,3}.
TEST_F(DistTest, GroupsRunCollectivesAmongTheirMembers) {
  const ProcessResult r = run_worker(launch(4, {DDP_WORKER, "groups"}));
  ASSERT_EQ(r.status, 0) << r.output;
  // rank r holds r + 1; a pair {2k, 2k+1} sums to 4k + 3, ranks {r, r + 2} to 2r + 4 (r < 2). reduce-scatter of
  // arange(4) * (r + 1) over a pair: 4k + 3 times [0, 1] to the first, [2, 3] to the second.
  const char* expected[] = {
      "[rank 0] pair_rank 0 of 2 across_rank 0 of 2 sum 3 across_sum 4 gathered 0,2, flat 0,1 scattered 0,3",
      "[rank 1] pair_rank 1 of 2 across_rank 0 of 2 sum 3 across_sum 6 gathered 1,3, flat 0,1 scattered 6,9",
      "[rank 2] pair_rank 0 of 2 across_rank 1 of 2 sum 7 across_sum 4 gathered 0,2, flat 2,3 scattered 0,7",
      "[rank 3] pair_rank 1 of 2 across_rank 1 of 2 sum 7 across_sum 6 gathered 1,3, flat 2,3 scattered 14,21",
  };
  for (const char* line : expected) EXPECT_NE(r.output.find(line), std::string::npos) << line << "\n" << r.output;
}

// Two "nodes" on this machine: two launchers of one rank each, running `worker`, whose ranks listen on 127.0.0.1 and
// 127.0.0.2 as ranks on two machines listen on their own addresses. Their exit statuses and outputs.
struct TwoNodes {
  int status[2] = {-1, -1};
  std::string out[2];
};

TwoNodes run_two_nodes(const std::vector<std::string>& worker) {
  const std::string port = std::to_string(testing::unused_port());
  auto node = [&](int rank) {
    std::vector<std::string> argv{COMPOSER_CPP,
                                  "launch",
                                  "-n",
                                  "1",
                                  "--nnodes",
                                  "2",
                                  "--node-rank",
                                  std::to_string(rank),
                                  "--master-addr",
                                  "127.0.0.1",
                                  "--master-port",
                                  port,
                                  "--node-addr",
                                  "127.0.0." + std::to_string(rank + 1),
                                  "--"};
    argv.insert(argv.end(), worker.begin(), worker.end());
    return argv;
  };
  testing::ChildProcess node0(node(0)), node1(node(1));
  TwoNodes r;
  std::string line;
  while (node1.read_line(line, 120)) r.out[1] += line + "\n";
  while (node0.read_line(line, 120)) r.out[0] += line + "\n";
  r.status[0] = node0.wait();
  r.status[1] = node1.wait();
  return r;
}

// Two "nodes" on one machine: two launchers, one rank each, whose ranks listen on different loopback addresses
// (127.0.0.1 and 127.0.0.2), as ranks on two machines listen on their own addresses; they connect and all-reduce.
TEST_F(DistTest, TwoNodesOnSeparateAddressesConnect) {
  const TwoNodes r = run_two_nodes({DDP_WORKER, "reducer"});
  const std::string &out0 = r.out[0], &out1 = r.out[1];
  ASSERT_EQ(r.status[0], 0) << out0;
  ASSERT_EQ(r.status[1], 0) << out1;
  EXPECT_NE(out0.find("[rank 0] buckets "), std::string::npos) << out0;
  EXPECT_NE(out0.find("listening on 127.0.0.1"), std::string::npos) << out0;
  EXPECT_NE(out1.find("listening on 127.0.0.2"), std::string::npos) << out1;
  const auto diff = out1.find("max_diff ");
  ASSERT_NE(diff, std::string::npos) << out1;
  EXPECT_LT(std::stod(out1.substr(diff + 9)), 1e-12) << out1;
}

// An unset seed and run name are rank 0's on every rank (Composer broadcasts the seed); each rank seeds with
// rank_zero_seed + rank.
TEST_F(DistTest, UnsetSeedAndRunNameAreRankZeros) {
  const ProcessResult r = run_worker(launch(2, {DDP_WORKER, "seed"}));
  ASSERT_EQ(r.status, 0) << r.output;
  std::map<int, std::string> seed, name;
  std::map<int, uint64_t> own;
  std::istringstream lines(r.output);
  for (std::string line; std::getline(lines, line);) {
    const auto at = line.find("] rank_zero_seed ");
    if (at == std::string::npos) continue;
    const int rank = std::stoi(line.substr(6));
    std::istringstream fields(line.substr(at + 2));
    std::string k1, v1, k2, k3, v3;
    uint64_t v2 = 0;
    fields >> k1 >> v1 >> k2 >> v2 >> k3 >> v3;
    seed[rank] = v1;
    own[rank] = v2;
    name[rank] = v3;
  }
  ASSERT_EQ(seed.size(), 2u) << r.output;
  EXPECT_EQ(seed[0], seed[1]) << r.output;
  EXPECT_EQ(name[0], name[1]) << r.output;
  EXPECT_EQ(own[1], own[0] + 1) << r.output;
}

TEST_F(DistTest, LauncherStopsTheOtherRanksWhenOneDies) {
  const auto start = std::chrono::steady_clock::now();
  const ProcessResult r = run_worker(launch(2, {DDP_WORKER, "die", "60"}, {"--grace", "2"}));
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.status, 3) << r.output;
  EXPECT_NE(r.output.find("rank 1 failed with exit code 3"), std::string::npos) << r.output;
  EXPECT_LT(secs, 30.0) << "rank 0 should have been stopped, not left waiting for its 60 s timeout";
}

// SIGTERM to the launcher stops every rank (forwarded, then SIGKILL after --grace); SIGKILL to the launcher takes the
// ranks with it (PR_SET_PDEATHSIG). No rank outlives it either way.
bool process_gone(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  if (!status) return true;
  for (std::string line; std::getline(status, line);)
    if (line.rfind("State:", 0) == 0) return line.find('Z') != std::string::npos;  // a zombie has ended
  return true;
}

std::vector<pid_t> wait_for_ready_ranks(testing::ChildProcess& launcher, int n, std::string& output) {
  std::vector<pid_t> pids;
  std::string line;
  while (static_cast<int>(pids.size()) < n && launcher.read_line(line, 60)) {
    output += line + "\n";
    const auto at = line.find("ready pid=");
    if (at != std::string::npos) pids.push_back(static_cast<pid_t>(std::stol(line.substr(at + 10))));
  }
  return pids;
}

TEST_F(DistTest, SignalsToTheLauncherStopEveryRank) {
  for (const int signo : {SIGTERM, SIGKILL}) {
    testing::ChildProcess launcher(launch(2, {DDP_WORKER, "sleep"}, {"--grace", "2"}));
    std::string output;
    const std::vector<pid_t> pids = wait_for_ready_ranks(launcher, 2, output);
    ASSERT_EQ(pids.size(), 2u) << output;
    ::kill(launcher.pid(), signo);
    std::string line;
    while (launcher.read_line(line, 20)) output += line + "\n";
    const int status = launcher.wait();
    if (signo == SIGTERM) {
      EXPECT_EQ(status, 128 + SIGTERM) << output;
      EXPECT_NE(output.find("stopping the ranks"), std::string::npos) << output;
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (pid_t pid : pids) {
      while (!process_gone(pid) && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      EXPECT_TRUE(process_gone(pid)) << "rank pid " << pid << " outlived the launcher (signal " << signo << ")";
    }
  }
}

TEST_F(DistTest, WrongWorldSizeTimesOutWithAClearError) {
  // Rank 0 of a world of 2 whose second rank never comes.
  ::setenv("WORLD_SIZE", "2", 1);
  ::setenv("RANK", "0", 1);
  ::setenv("MASTER_PORT", std::to_string(testing::unused_port()).c_str(), 1);
  const auto start = std::chrono::steady_clock::now();
  const ProcessResult r = run_worker({DDP_WORKER, "rendezvous", "3"});
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ::unsetenv("WORLD_SIZE");
  ::unsetenv("RANK");
  ::unsetenv("MASTER_PORT");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("WORLD_SIZE=2"), std::string::npos) << r.output;
  EXPECT_LT(secs, 20.0);
}

TEST_F(DistTest, CollectiveWithADeadPeerFailsWithAMessage) {
  const ProcessResult r = run_worker(launch(2, {DDP_WORKER, "orphan", "10"}, {"--grace", "2"}));
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("barrier failed on rank 0"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("terminate called"), std::string::npos) << r.output;
}

// A peer SIGKILLed inside a training step (its microbatches' gradient all-reduces in flight on the survivor), as
// on another node whose launcher cannot stop ours: the survivor fails with the collective's message, and never with
// std::terminate from a destructor that waited on a failed collective (GradientReducer's, FSDP's gather scope). The
// timing varies, so a few runs.
TEST_F(DistTest, SurvivorOfAKilledPeerFailsWithAMessage) {
  for (int run = 0; run < 4; ++run) {
    const TwoNodes r = run_two_nodes({DDP_WORKER, "killed_peer"});
    const std::string &out0 = r.out[0], &out1 = r.out[1];
    EXPECT_NE(r.status[1], 0) << out1;
    EXPECT_NE(r.status[0], 0) << out0;
    EXPECT_NE(out0.find("failed on rank 0 (a peer died or timed out?)"), std::string::npos) << out0;
    EXPECT_EQ(out0.find("terminate called"), std::string::npos) << "run " << run << ":\n" << out0;
  }
}

TEST_F(DistTest, TrainerRefusesAnUnshardedLoaderInAMultiRankRun) {
  const ProcessResult r = run_worker(launch(2, {DDP_WORKER, "unsharded"}, {"--grace", "2"}));
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("The world_size(2) > 1 but the training dataloader does not shard"), std::string::npos)
      << r.output;
}

TEST_F(DistTest, UnreachableMasterFailsWithinTheTimeout) {
  ::setenv("WORLD_SIZE", "2", 1);
  ::setenv("RANK", "1", 1);
  ::setenv("MASTER_PORT", std::to_string(testing::unused_port()).c_str(), 1);
  const auto start = std::chrono::steady_clock::now();
  testing::ChildProcess p({DDP_WORKER, "rendezvous", "3"});
  const int status = p.wait();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ::unsetenv("WORLD_SIZE");
  ::unsetenv("RANK");
  ::unsetenv("MASTER_PORT");
  EXPECT_EQ(status, 1);
  EXPECT_LT(secs, 20.0);
}

// The YAML CLI under the launcher: training data is sharded automatically and only rank 0 prints the summary.
TEST_F(DistTest, LaunchTrainFromAConfig) {
  const std::string cfg = (dir / "ddp.yaml").string();
  std::ofstream(cfg)
      << "model: {name: mlp, in_features: 64, hidden: [16]}\n"
         "train_data: {dataset: synthetic_images, channels: 1, size: 8, num_samples: 256, batch_size: 16, num_workers: "
         "0}\n"
         "eval_data: {dataset: synthetic_images, split: test, channels: 1, size: 8, num_samples: 64, batch_size: 64}\n"
         "max_duration: 1ep\nprogress_bar: false\nrun_name: ddp\n";
  const ProcessResult r = run_worker({COMPOSER_CPP, "launch", "-n", "2", "train", cfg});
  ASSERT_EQ(r.status, 0) << r.output;
  // 256 samples over 2 ranks with 16 per rank per batch: 8 batches, 256 samples counted globally.
  EXPECT_NE(r.output.find("[rank 0] composer-cpp: trained run 'ddp' to 1ep (8 batches)"), std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("[rank 1] composer-cpp: trained"), std::string::npos) << r.output;
}

// CI's build must have a CPU process-group backend: the wheel ships no Gloo headers, libgloo-dev supplies them.
TEST(DistSingleProcess, GlooBackendIsCompiledIn) {
  EXPECT_EQ(COMPOSER_HAS_GLOO, 1) << "gloo/algorithm.h was not found at configure time (apt-get install libgloo-dev)";
}

TEST(DistSingleProcess, CollectivesAreIdentityAtWorldSizeOne) {
  at::Tensor t = at::arange(4).to(at::kFloat);
  dist::all_reduce(t);
  dist::broadcast(t, 0);
  dist::barrier();
  EXPECT_TRUE(t.equal(at::arange(4).to(at::kFloat)));
  EXPECT_EQ(dist::all_gather(t).size(), 1u);
  EXPECT_EQ(dist::all_gather_object("x"), std::vector<std::string>{"x"});
}

TEST(DistSingleProcess, NewGroupChecksItsRanks) {
  const dist::Group alone = dist::new_group({0});
  EXPECT_EQ(alone.size(), 1);
  EXPECT_EQ(alone.rank(), 0);
  at::Tensor t = at::ones({2});
  dist::all_reduce(t, dist::ReduceOp::SUM, alone);  // a group of one: no collective
  EXPECT_TRUE(t.equal(at::ones({2})));
  const auto refused = [](const std::vector<int64_t>& ranks, const std::string& expected) {
    try {
      dist::new_group(ranks);
      ADD_FAILURE() << "accepted " << expected;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  };
  refused({}, "dist::new_group: no ranks given");
  refused({0, 0}, "ranks [0,0] name a rank twice");
  refused({0, 1}, "ranks [0,1] must lie in [0, 1) (WORLD_SIZE)");
}

TEST(DistSingleProcess, LoadersReportWhetherTheyShard) {
  TensorDataLoader plain(Batch(at::randn({4, 2}), at::zeros({4}, at::kLong)), TensorDataLoaderOptions(2));
  EXPECT_FALSE(plain.is_distributed());
  TensorDataLoader sharded(Batch(at::randn({4, 2}), at::zeros({4}, at::kLong)),
                           TensorDataLoaderOptions(2).num_replicas(2).rank(1));
  EXPECT_TRUE(sharded.is_distributed());
}

}  // namespace
}  // namespace composer
