// FSDP with real processes over Gloo (composer-cpp launch): float64 runs on 2, 3 and 4 ranks reach the weights of one
// process with the global batch (within 1e-10), for FULL_SHARD, SHARD_GRAD_OP and NO_SHARD, with DecoupledAdamW and
// DecoupledSGDW in two parameter groups, with microbatching and with norm clipping; each rank keeps 1/N of the
// parameters; the evaluation at the end of fit scores as one process does; full checkpoints hold what one process
// holds and resume on another world size; unsupported settings are clear errors.
#include "support/checkpoint_leaves.h"
#include "support/moto_server.h"
#include "support/process.h"
#include "support/python.h"
#include "support/run_files.h"
#include "support/scoped_env.h"
#include "support/worker_run.h"

#include "composer/composer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <sstream>

#include <unistd.h>

namespace composer {
namespace {

namespace fs = std::filesystem;
using testing::run_worker;

std::vector<std::string> launch(int n, const std::vector<std::string>& command) {
  return testing::launch_argv(COMPOSER_CPP, n, command);
}

struct FsdpTest : ::testing::Test {
  fs::path dir = fs::temp_directory_path() / ("composer_fsdp_" + std::to_string(::getpid()));
  void SetUp() override { fs::create_directories(dir); }
  void TearDown() override { fs::remove_all(dir); }
  std::map<std::string, std::string> reference_output_;  // what each reference run printed
  void expect_resumes_with(const std::string& algorithm, testing::ScopedEnv& env);
  // Autoresumes on 2 FULL_SHARD ranks from the checkpoints in `folder` (saving there again); the run writes
  // dir/autoresumed.pt.
  testing::WorkerResult autoresume_from(testing::ScopedEnv& env, const std::string& folder) const {
    env.set("FSDP_WORKER_LOAD", "");
    env.set("FSDP_WORKER_SAVE", folder);
    env.set("FSDP_WORKER_AUTORESUME", "1");
    return run_worker(launch(2, {FSDP_WORKER, (dir / "autoresumed.pt").string(), "FULL_SHARD", "adamw", "0"}));
  }

  // FSDP_WORKER_ALGORITHM and FSDP_WORKER_FREEZE, for the runs' file names.
  static std::string algorithm_tag() {
    std::string tag;
    for (const char* name : {"FSDP_WORKER_ALGORITHM", "FSDP_WORKER_FREEZE"})
      if (const char* a = std::getenv(name); a && *a) tag += std::string("-") + a;
    return tag;
  }

  // One process, the whole batch: the reference for `optimizer`, `microbatch`, `clip`.
  std::string reference(const std::string& optimizer, const std::string& microbatch, const std::string& clip) {
    const std::string out =
        (dir / ("one-" + optimizer + "-" + microbatch + "-" + clip + algorithm_tag() + ".pt")).string();
    if (reference_output_.count(out)) return out;
    std::vector<std::string> argv{FSDP_WORKER, out, "ddp", optimizer, microbatch};
    if (!clip.empty()) argv.push_back(clip);
    const auto r = run_worker(argv);
    EXPECT_EQ(r.status, 0) << r.output;
    reference_output_[out] = r.output;
    return out;
  }

  // Runs `strategy` on `ranks` ranks (in `replicas` shard groups: FSDP_WORKER_REPLICATE) and checks its final
  // weights against the one-process run.
  void expect_equal_to_one_process(int ranks, const std::string& strategy, const std::string& optimizer,
                                   const std::string& microbatch, const std::string& clip = "", int replicas = 0) {
    testing::ScopedEnv env;
    env.set("FSDP_WORKER_REPLICATE", replicas ? std::to_string(replicas) : "");
    const int shard_ranks = replicas ? ranks / replicas : ranks;
    const std::string one = reference(optimizer, "0", clip);
    const std::string out =
        (dir / (strategy + "-" + std::to_string(ranks) + "-" + optimizer + "-" + microbatch + algorithm_tag() + ".pt"))
            .string();
    std::vector<std::string> argv{FSDP_WORKER, out, strategy, optimizer, microbatch};
    if (!clip.empty()) argv.push_back(clip);
    const auto r = run_worker(launch(ranks, argv));
    ASSERT_EQ(r.status, 0) << r.output;
    const auto a = testing::read_pickled_tensors(one), b = testing::read_pickled_tensors(out);
    ASSERT_EQ(a.size(), 4u);
    ASSERT_EQ(a.size(), b.size());
    for (const auto& [name, t] : a) {
      ASSERT_TRUE(b.count(name)) << name;
      ASSERT_EQ(t.sizes(), b.at(name).sizes()) << name;
      EXPECT_LT((t - b.at(name)).abs().max().item<double>(), 1e-10)
          << name << ": " << strategy << " on " << ranks << " ranks, " << optimizer << ", microbatch " << microbatch
          << " " << clip;
    }
    const bool freezing = std::getenv("FSDP_WORKER_FREEZE") && *std::getenv("FSDP_WORKER_FREEZE");
    if (fs::exists(one + ".ema")) {  // EMA's averaged weights (the trainable ones), gathered whole from the parts
      const auto ea = testing::read_pickled_tensors(one + ".ema"), eb = testing::read_pickled_tensors(out + ".ema");
      ASSERT_EQ(ea.size(), freezing ? 2u : 4u);
      ASSERT_EQ(eb.size(), ea.size());
      for (const auto& [name, t] : ea)
        EXPECT_LT((t - eb.at(name)).abs().max().item<double>(), 1e-10) << "EMA's " << name << " under " << strategy;
    }
    // The evaluation at the end of fit (every unit gathered for the eval forward) scores as one process does.
    const auto mine = testing::printed_pairs(r.output, "eval "),
               theirs = testing::printed_pairs(reference_output_.at(one), "eval ");
    ASSERT_FALSE(theirs.empty()) << reference_output_.at(one);
    ASSERT_EQ(mine.size(), theirs.size()) << r.output;
    for (const auto& [name, value] : theirs) EXPECT_NEAR(mine.at(name), value, 1e-6 * std::abs(value)) << name;
    if (strategy != "NO_SHARD" && shard_ranks > 1) {  // each rank keeps 1/N of N sharding ranks, up to the
      // padding of the 4 flat buffers (< N each)
      const auto shard = testing::printed_values(r.output, "shard_bytes ", "[rank 1] ");
      const auto full = testing::printed_values(r.output, "full_bytes ", "[rank 1] ");
      ASSERT_EQ(shard.size(), 1u) << r.output;
      ASSERT_EQ(full.size(), 1u) << r.output;
      EXPECT_GE(shard[0], full[0] / shard_ranks);
      EXPECT_LE(shard[0], full[0] / shard_ranks + 4 * shard_ranks * 8);
      EXPECT_EQ(full[0], 3264);  // all 408 float64 elements: the frozen ones are sharded too
      // Each Linear is a unit (with activation checkpointing too: the units are found inside the wrappers).
      EXPECT_EQ(testing::printed_values(r.output, "units ", "[rank 1] "), std::vector<double>{2}) << r.output;
    }
  }
};

TEST_F(FsdpTest, FullShardOnTwoAndThreeRanksEqualsOneProcess) {
  for (int ranks : {2, 3}) {
    expect_equal_to_one_process(ranks, "FULL_SHARD", "adamw", "0");
    expect_equal_to_one_process(ranks, "FULL_SHARD", "sgdw", "0");
  }
}

TEST_F(FsdpTest, ShardGradOpAndNoShardEqualOneProcess) {
  expect_equal_to_one_process(2, "SHARD_GRAD_OP", "adamw", "0");
  expect_equal_to_one_process(3, "SHARD_GRAD_OP", "sgdw", "0");
  expect_equal_to_one_process(2, "NO_SHARD", "adamw", "0");
  expect_equal_to_one_process(4, "FULL_SHARD", "adamw", "0");  // 6 samples per rank
}

TEST_F(FsdpTest, MicrobatchesAndNormClippingEqualOneProcess) {
  expect_equal_to_one_process(2, "FULL_SHARD", "adamw", "4");  // 12 samples per rank in 3 microbatches
  expect_equal_to_one_process(3, "SHARD_GRAD_OP", "sgdw", "3", "norm:0.05");
  expect_equal_to_one_process(2, "FULL_SHARD", "sgdw", "0", "norm:0.05");
  // The threshold clips: the clipped reference is not the unclipped one.
  const auto clipped = testing::read_pickled_tensors(reference("sgdw", "0", "norm:0.05"));
  const auto plain = testing::read_pickled_tensors(reference("sgdw", "0", ""));
  double moved = 0;
  for (const auto& [name, t] : clipped) moved = std::max(moved, (t - plain.at(name)).abs().max().item<double>());
  EXPECT_GT(moved, 1e-4);
}

// EMA, SAM and SWA under FSDP. EMA and SWA: each rank averages its part of each parameter (the averaged copy is
// sharded like them); EMA evaluates with the averaged weights, SWA loads them into the shards at swa_end; both gather
// them whole for their checkpoint state. SAM: the first closure's gradients are averaged across ranks and the ascent's
// norm is over every rank's part, so each rank perturbs its part as one process with the global batch does. The
// weights (SWA's: the average), EMA's averaged weights and the evaluation equal one process within 1e-10, and the SAM
// and SWA runs are not the plain one.
TEST_F(FsdpTest, EmaAndSamEqualOneProcess) {
  testing::ScopedEnv env;
  for (const char* algorithm : {"ema", "sam", "swa"}) {
    env.set("FSDP_WORKER_ALGORITHM", algorithm);
    expect_equal_to_one_process(2, "FULL_SHARD", "adamw", "0");
    expect_equal_to_one_process(3, "SHARD_GRAD_OP", "sgdw", "0");
    expect_equal_to_one_process(2, "NO_SHARD", "adamw", "0");
    expect_equal_to_one_process(4, "FULL_SHARD", "adamw", "0", "", /*replicas=*/2);
  }
  env.set("FSDP_WORKER_ALGORITHM", "");
  const auto plain = testing::read_pickled_tensors(reference("adamw", "0", ""));
  for (const char* algorithm : {"sam", "swa"}) {
    env.set("FSDP_WORKER_ALGORITHM", algorithm);
    double moved = 0;
    for (const auto& [name, t] : testing::read_pickled_tensors(reference("adamw", "0", "")))
      moved = std::max(moved, (t - plain.at(name)).abs().max().item<double>());
    EXPECT_GT(moved, 1e-6) << algorithm;
  }
}

// OptimizerMonitor under FSDP: the gradients and DecoupledAdamW's moments live in the flat shards (the model's
// parameters have none after the step's reduction), so the strategy adds each parameter's parts over the ranks: its
// gradient, moment, param and update norms over every rank's part of it equal one process's.
TEST_F(FsdpTest, OptimizerMonitorNormsEqualOneProcess) {
  testing::ScopedEnv env;
  env.set("FSDP_WORKER_GRAD_NORMS", "1");
  const auto norms = [](const std::string& output) { return testing::printed_pairs(output, "monitored "); };
  const auto one = run_worker({FSDP_WORKER, (dir / "norms-one.pt").string(), "ddp", "adamw", "0"});
  ASSERT_EQ(one.status, 0) << one.output;
  const auto theirs = norms(one.output);
  ASSERT_EQ(theirs.size(), 17u) << one.output;  // 4 metrics of 4 parameters, and the global gradient norm
  size_t updates = 0;
  for (const auto& [key, value] : theirs) updates += key.rfind("l2_norm/update/", 0) == 0 ? 1 : 0;
  EXPECT_EQ(updates, 4u) << one.output;
  for (const auto& [strategy, ranks] : std::vector<std::pair<std::string, int>>{{"FULL_SHARD", 3}, {"NO_SHARD", 2}}) {
    const auto r = run_worker(
        launch(ranks, {FSDP_WORKER, (dir / ("norms-" + strategy + ".pt")).string(), strategy, "adamw", "0"}));
    ASSERT_EQ(r.status, 0) << r.output;
    const auto mine = norms(r.output);
    ASSERT_EQ(mine.size(), theirs.size()) << r.output;
    for (const auto& [key, value] : theirs) {
      EXPECT_GT(value, 0) << key;
      EXPECT_NEAR(mine.at(key), value, 1e-10 * value) << key << " under " << strategy;
    }
  }
}

// HYBRID_SHARD (data_parallel_replicate_degree set): each shard group of consecutive ranks shards the model, the
// groups replicate each other; the gradients are reduce-scattered in the group and all-reduced across the replicas.
// The weights equal one process's; each rank holds 1/(shard group size); FULL_SHARD and SHARD_GRAD_OP switch to the
// hybrid kinds as in Composer, and shard groups of one rank run as NO_SHARD over every rank.
TEST_F(FsdpTest, HybridShardEqualsOneProcess) {
  expect_equal_to_one_process(4, "HYBRID_SHARD", "adamw", "0", "", 2);
  expect_equal_to_one_process(4, "SHARD_GRAD_OP", "sgdw", "3", "norm:0.05", 2);  // clipped over each shard group
  expect_equal_to_one_process(4, "FULL_SHARD", "sgdw", "0", "", 4);              // 4 groups of one rank
  testing::ScopedEnv env;
  env.set("FSDP_WORKER_REPLICATE", "2");
  const auto r = run_worker(launch(4, {FSDP_WORKER, (dir / "h.pt").string(), "SHARD_GRAD_OP", "adamw", "0"}));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("[rank 3] strategy _HYBRID_SHARD_ZERO2"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[rank 3] mesh 2 2"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("sharding_strategy SHARD_GRAD_OP with data_parallel_replicate_degree: using "
                          "_HYBRID_SHARD_ZERO2"),
            std::string::npos)
      << r.output;
  // Three ranks cannot form two equal shard groups.
  env.set("FSDP_WORKER_REPLICATE", "2");
  const auto uneven = run_worker(launch(3, {FSDP_WORKER, (dir / "u.pt").string(), "HYBRID_SHARD", "adamw", "0"}));
  EXPECT_NE(uneven.status, 0);
  EXPECT_NE(uneven.output.find("data_parallel_shard_degree -1, data_parallel_replicate_degree 2: their product must "
                               "divide the world size 3"),
            std::string::npos)
      << uneven.output;
  EXPECT_FALSE(fs::exists(dir / "u.pt"));
}

// Activation checkpointing recomputes each Linear unit in the backward (the first on the data, which needs no
// gradient): the same weights as one process without it, to 1e-10.
TEST_F(FsdpTest, ActivationCheckpointingEqualsOneProcess) {
  // The references: one process, the torch::nn model, no checkpointing.
  reference("adamw", "0", "");
  reference("sgdw", "0", "");
  reference("sgdw", "0", "norm:0.05");
  testing::ScopedEnv env;
  env.set("FSDP_WORKER_ACTIVATION_CHECKPOINTING", "1");
  expect_equal_to_one_process(2, "FULL_SHARD", "adamw", "0");
  expect_equal_to_one_process(3, "SHARD_GRAD_OP", "sgdw", "3");  // with microbatches
  expect_equal_to_one_process(2, "FULL_SHARD", "sgdw", "0", "norm:0.05");
  env.set("FSDP_WORKER_ACTIVATION_CHECKPOINTING", "offload");  // activation_cpu_offload: the kept inputs' path
  expect_equal_to_one_process(2, "FULL_SHARD", "adamw", "0");
}

// Each Linear unit (composer::nn layers) is gathered around its own forward and backward, its gradient
// reduce-scattered when its backward is done, the next unit prefetched: the same weights as one process, with every
// prefetch setting, microbatches and clipping; FULL_SHARD with BACKWARD_POST never holds both units at once.
TEST_F(FsdpTest, PerUnitGatheringEqualsOneProcess) {
  reference("adamw", "0", "");
  reference("sgdw", "0", "");
  reference("sgdw", "0", "norm:0.05");
  const auto peak_and_full = [this](int ranks, const std::string& strategy) {
    const std::string out = (dir / (strategy + "-" + std::to_string(ranks) + "-adamw-0.pt")).string();
    const auto r = run_worker(launch(ranks, {FSDP_WORKER, out, strategy, "adamw", "0"}));
    EXPECT_EQ(r.status, 0) << r.output;
    const std::string last = "[rank " + std::to_string(ranks - 1) + "] ";
    const auto per_unit = testing::printed_values(r.output, "per_unit ", last);
    const auto peak = testing::printed_values(r.output, "peak_gathered ", last);
    const auto full = testing::printed_values(r.output, "full_bytes ", last);
    EXPECT_EQ(peak.size(), 1u) << r.output;
    EXPECT_EQ(full.size(), 1u) << r.output;
    EXPECT_EQ(per_unit.size(), 1u) << r.output;
    return std::vector<double>{per_unit.at(0), peak.at(0), full.at(0)};
  };
  // The torch::nn model cannot be rewired: its units are gathered with the whole model.
  const auto whole = peak_and_full(2, "FULL_SHARD");
  EXPECT_EQ(whole[0], 0);
  EXPECT_GE(whole[1], whole[2]);

  testing::ScopedEnv env;
  env.set("FSDP_WORKER_NN_LAYERS", "1");
  // Units of 217 + 31 and 155 + 5 float64 elements (padded to 250 and 162 on 2 ranks): 2000 of 3296 bytes at most.
  const auto per_unit = peak_and_full(2, "FULL_SHARD");
  EXPECT_EQ(per_unit[0], 2);
  EXPECT_EQ(per_unit[1], 2000);
  EXPECT_EQ(peak_and_full(2, "SHARD_GRAD_OP")[1], 3296);  // kept from the forward to the backward
  // One rank has nothing to shard: it runs as NO_SHARD, as torch FSDP does (nothing gathered, no copies).
  const auto one = peak_and_full(1, "FULL_SHARD");
  EXPECT_EQ(one[0], 0);
  EXPECT_EQ(one[1], 0);
  expect_equal_to_one_process(2, "FULL_SHARD", "adamw", "0");
  expect_equal_to_one_process(3, "SHARD_GRAD_OP", "sgdw", "3", "norm:0.05");
  expect_equal_to_one_process(3, "FULL_SHARD", "sgdw", "0");
  env.set("FSDP_WORKER_BACKWARD_PREFETCH", "PRE");
  env.set("FSDP_WORKER_FORWARD_PREFETCH", "1");
  expect_equal_to_one_process(2, "FULL_SHARD", "adamw", "4");  // 3 microbatches
  expect_equal_to_one_process(4, "FULL_SHARD", "sgdw", "0", "norm:0.05");
  env.set("FSDP_WORKER_BACKWARD_PREFETCH", "NONE");
  expect_equal_to_one_process(3, "FULL_SHARD", "adamw", "3");
}

// mixed_precision param_dtype float32 on the float64 model: the forward and backward run in float32 (the outputs are
// float32) while the shards, the optimizer and the saved weights stay float64; the weights end near the float64
// run's but not on them; reduce_dtype float64 reduces differently from float32. Sharded, unsharded (one rank too),
// whole-model and per-unit gathering alike.
TEST_F(FsdpTest, MixedPrecisionComputesInParamDtypeAndKeepsFullPrecisionWeights) {
  const auto one = testing::read_pickled_tensors(reference("adamw", "0", ""));
  testing::ScopedEnv env;
  int run = 0;
  std::string output;
  const auto train = [&](int ranks, const std::string& strategy, const std::string& mp) {
    env.set("FSDP_WORKER_MIXED_PRECISION", mp);
    const std::string out = (dir / ("mp-" + std::to_string(run++) + ".pt")).string();
    const auto r = run_worker(launch(ranks, {FSDP_WORKER, out, strategy, "adamw", "0"}));
    EXPECT_EQ(r.status, 0) << r.output;
    output = r.output;
    const auto dtype = testing::printed_words(r.output, "outputs_dtype ");
    EXPECT_FALSE(dtype.empty()) << r.output;
    for (const auto& d : dtype) EXPECT_EQ(d, mp == "FULL" ? "Double" : "Float") << strategy << " " << mp;
    const auto w = testing::read_pickled_tensors(out);
    EXPECT_EQ(w.size(), one.size());
    double off = 0;
    for (const auto& [name, t] : w) {
      EXPECT_EQ(t.scalar_type(), at::kDouble) << name;
      off = std::max(off, (t - one.at(name)).abs().max().item<double>());
    }
    EXPECT_LT(off, 1e-4) << strategy << " " << mp << " on " << ranks;
    if (mp == "FULL")
      EXPECT_LT(off, 1e-10);
    else
      EXPECT_GT(off, 1e-9) << "float32 compute left no trace: " << strategy << " " << mp << " on " << ranks;
    return w;
  };
  const auto f32 = train(2, "FULL_SHARD", "f32");
  const auto reduce64 = train(2, "FULL_SHARD", "f32-reduce64");
  double apart = 0;
  for (const auto& [name, t] : f32) apart = std::max(apart, (t - reduce64.at(name)).abs().max().item<double>());
  EXPECT_GT(apart, 0) << "reduce_dtype float64 reduced as float32 did";
  train(3, "SHARD_GRAD_OP", "f32");
  train(2, "NO_SHARD", "f32");
  train(1, "FULL_SHARD", "f32");
  train(2, "FULL_SHARD", "FULL");
  env.set("FSDP_WORKER_NN_LAYERS", "1");  // each unit gathered (in float32) around its own passes
  train(2, "FULL_SHARD", "f32");
  // Gathered in float32: half the bytes of PerUnitGatheringEqualsOneProcess's 2000 at most at once.
  EXPECT_EQ(testing::printed_values(output, "peak_gathered ", "[rank 1] "), std::vector<double>{1000}) << output;
}

// A module whose float64 buffer counts its training forwards in steps of 1/3 and notes the dtype it saw.
struct CountingNet : torch::nn::Module {
  torch::nn::Linear fc{nullptr};
  at::Tensor count;
  std::vector<at::ScalarType> seen;
  CountingNet() {
    fc = register_module("fc", torch::nn::Linear(4, 3));
    count = register_buffer("count", at::zeros({1}, at::kDouble));
  }
  at::Tensor forward(const at::Tensor& x) {
    seen.push_back(count.scalar_type());
    if (is_training()) count.add_(1.0 / 3);
    return fc->forward(x);
  }
};

// buffer_dtype (one process, FSDP running as NO_SHARD): the buffer is float16 inside every forward, float64 between
// them, and holds what float16 accumulation gives (torch keeps the buffer in float16 throughout: the same values).
TEST(FsdpMixedPrecision, BuffersRunInBufferDtypeAndKeepTheirOwnBetweenPasses) {
  torch::manual_seed(0);
  auto net = std::make_shared<CountingNet>();
  net->to(at::kDouble);
  auto model = ComposerClassifier::wrap(net);
  auto loader = std::make_shared<DatasetLoader>(
      std::make_shared<TensorDataset>(Batch(at::randn({40, 4}, at::kDouble), at::randint(3, {40}))),
      DatasetLoaderOptions(8).num_workers(0));
  Trainer trainer(TrainerOptions(model)
                      .train_dataloader(loader)
                      .max_duration("5ba")
                      .device("cpu")
                      .progress_bar(false)
                      .parallelism_config(dist::ParallelismConfig().fsdp(dist::FSDPOptions().mixed_precision(
                          dist::FSDPMixedPrecision::custom({std::nullopt, std::nullopt, at::kHalf})))));
  trainer.fit();
  ASSERT_EQ(net->seen.size(), 5u);
  for (const auto dtype : net->seen) EXPECT_EQ(dtype, at::kHalf);
  ASSERT_EQ(net->count.scalar_type(), at::kDouble);
  at::Tensor expected = at::zeros({1}, at::kHalf);
  for (int i = 0; i < 5; ++i) expected.add_(1.0 / 3);
  EXPECT_EQ(net->count.item<double>(), expected.item<double>());
  EXPECT_GT(std::abs(net->count.item<double>() - 5.0 / 3), 1e-4);  // float16 accumulation shows
  EXPECT_FALSE(model->parameters().empty());
  for (const auto& p : model->parameters()) EXPECT_EQ(p.scalar_type(), at::kDouble);
}

// The one-process run with a full checkpoint every 3 batches: its final weights' file and its batch-3 checkpoint.
std::pair<std::string, std::string> one_process_with_checkpoints(const fs::path& dir, testing::ScopedEnv& env) {
  env.set("FSDP_WORKER_SAVE", (dir / "one").string());
  const std::string one = (dir / "one.pt").string();
  const auto r = run_worker({FSDP_WORKER, one, "ddp", "adamw", "0"});
  EXPECT_EQ(r.status, 0) << r.output;
  const std::string ckpt = (dir / "one" / "ep0-ba3-rank0.pt").string();
  EXPECT_TRUE(fs::exists(ckpt)) << r.output;
  return {one, ckpt};
}

// The weights in two files written by the worker agree within 1e-10.
void expect_weights_near(const std::string& a_path, const std::string& b_path, const std::string& what) {
  const auto a = testing::read_pickled_tensors(a_path), b = testing::read_pickled_tensors(b_path);
  ASSERT_EQ(a.size(), b.size()) << what;
  for (const auto& [name, t] : a) EXPECT_LT((t - b.at(name)).abs().max().item<double>(), 1e-10) << name << what;
}

// PyTorch reads a sharded checkpoint directory (torch.distributed.checkpoint's own reader and planner) into one
// torch.save file, `out`.
testing::PythonResult torch_save_of_dcp(const fs::path& ckpt, const std::string& out) {
  return testing::run_python({"-c",
                              "import sys; from torch.distributed.checkpoint.format_utils import dcp_to_torch_save; "
                              "dcp_to_torch_save(sys.argv[1], sys.argv[2])",
                              ckpt.string(), out});
}

// The two checkpoints hold the same paths; tensors equal within `tolerance` (0: bitwise), the rest equal.
void expect_same_state(const std::string& a_path, const std::string& b_path, double tolerance) {
  // 4 parameters, and DecoupledAdamW's step, exp_avg, exp_avg_sq for each
  EXPECT_EQ(testing::expect_same_checkpoint_state(a_path, b_path, tolerance), 4 + 4 * 3);
}

// state_dict_type full: FULL_SHARD on N ranks saves at batch 3 a file that holds what one process holds then (the
// same keys; weights and optimizer state within 1e-10); M ranks load exactly the saved weights and optimizer state
// (loaded and written again: bitwise the same) and train on to the one-process run's weights at batch 6. The 4-rank
// run shards the whole model as one unit, so its flat buffers hold several parameters each.
TEST_F(FsdpTest, FullCheckpointsResumeOnAnotherWorldSize) {
  testing::ScopedEnv env;
  const auto [one, one_ckpt] = one_process_with_checkpoints(dir, env);
  for (const auto& [saved_on, resumed_on] : std::vector<std::pair<int, int>>{{2, 3}, {4, 2}, {3, 1}}) {
    const std::string tag = std::to_string(saved_on) + "to" + std::to_string(resumed_on);
    const fs::path folder = dir / ("saved" + tag);
    env.set("FSDP_WORKER_SAVE", folder.string());
    const std::string out = (dir / ("run" + tag + ".pt")).string();
    // 4 ranks save with the whole model as one unit (flat buffers of several parameters); 2 resume per Linear.
    env.set("FSDP_WORKER_ONE_UNIT", saved_on == 4 ? "1" : "");
    const auto saving = run_worker(launch(saved_on, {FSDP_WORKER, out, "FULL_SHARD", "adamw", "0"}));
    env.set("FSDP_WORKER_ONE_UNIT", "");
    ASSERT_EQ(saving.status, 0) << saving.output;
    const std::string ckpt = (folder / "ep0-ba3-rank0.pt").string();
    ASSERT_TRUE(fs::exists(ckpt)) << saving.output;
    EXPECT_FALSE(fs::exists(folder / "ep0-ba3-rank1.pt"));  // one file, from rank 0
    expect_same_state(one_ckpt, ckpt, 1e-10);

    env.set("FSDP_WORKER_SAVE", "");
    env.set("FSDP_WORKER_LOAD", ckpt);
    const std::string again = (dir / ("again" + tag + ".pt")).string();
    env.set("FSDP_WORKER_RESAVE", again);
    const auto loading = run_worker(launch(resumed_on, {FSDP_WORKER, out, "FULL_SHARD", "adamw", "0"}));
    ASSERT_EQ(loading.status, 0) << loading.output;
    expect_same_state(ckpt, again, 0);

    env.set("FSDP_WORKER_RESAVE", "");
    const std::string resumed = (dir / ("resumed" + tag + ".pt")).string();
    const auto resuming = run_worker(launch(resumed_on, {FSDP_WORKER, resumed, "FULL_SHARD", "adamw", "0"}));
    ASSERT_EQ(resuming.status, 0) << resuming.output;
    expect_weights_near(one, resumed, " resumed " + tag);
    env.set("FSDP_WORKER_LOAD", "");
  }
}

// EMA's and SWA's checkpoint state under FSDP holds the whole averaged weights (gathered from the ranks' parts while
// it saves): saved at batch 3 on 2 ranks (state_dict_type full and sharded), the run resumes on 3 ranks, each cutting
// its parts, to the uninterrupted one-process run's weights and (EMA's) averaged weights (within 1e-10).
TEST_F(FsdpTest, EmaAndSwaCheckpointsResumeOnAnotherWorldSize) {
  testing::ScopedEnv env;
  for (const std::string algorithm : {"ema", "swa"}) {
    env.set("FSDP_WORKER_ALGORITHM", algorithm);
    env.set("FSDP_WORKER_SHARDED", "");
    env.set("FSDP_WORKER_LOAD", "");
    fs::remove_all(dir / "one");
    expect_resumes_with(algorithm, env);
  }
}

// Saves at batch 3 on 2 ranks (full and sharded checkpoints) and resumes on 3, for FSDP_WORKER_ALGORITHM `algorithm`.
void FsdpTest::expect_resumes_with(const std::string& algorithm, testing::ScopedEnv& env) {
  const auto [one, one_ckpt] = one_process_with_checkpoints(dir, env);
  if (algorithm == "ema") {
    ASSERT_TRUE(fs::exists(one + ".ema"));
  }
  for (const std::string sharded : {"", "1"}) {
    env.set("FSDP_WORKER_SHARDED", sharded);
    const std::string tag = algorithm + "-" + (sharded.empty() ? "full" : "sharded");
    const fs::path folder = dir / ("ema-" + tag);
    env.set("FSDP_WORKER_SAVE", folder.string());
    env.set("FSDP_WORKER_LOAD", "");
    const auto saving =
        run_worker(launch(2, {FSDP_WORKER, (dir / ("x-" + tag + ".pt")).string(), "FULL_SHARD", "adamw", "0"}));
    ASSERT_EQ(saving.status, 0) << saving.output;
    const fs::path ckpt = sharded.empty() ? folder / "ep0-ba3-rank0.pt" : folder / "ep0-ba3";
    ASSERT_TRUE(fs::exists(ckpt)) << saving.output;
    env.set("FSDP_WORKER_SAVE", "");
    env.set("FSDP_WORKER_LOAD", ckpt.string());
    const std::string resumed = (dir / ("ema-resumed-" + tag + ".pt")).string();
    const auto resuming = run_worker(launch(3, {FSDP_WORKER, resumed, "FULL_SHARD", "adamw", "0"}));
    ASSERT_EQ(resuming.status, 0) << resuming.output;
    expect_weights_near(one, resumed, " resumed from a " + tag + " checkpoint");
    if (algorithm == "ema")
      expect_weights_near(one + ".ema", resumed + ".ema", " (EMA's) resumed from a " + tag + " checkpoint");
  }
}

// load_monolith_rank0_only: only rank 0 reads the full checkpoint (ranks 1 and 2 are given a path that does not
// exist, as when the file is on rank 0's node alone); the 3 ranks load bitwise what 2 saved and train on to the
// one-process run's weights. A checkpoint rank 0 cannot read is every rank's clear error.
TEST_F(FsdpTest, LoadMonolithRank0OnlyReadsTheFileOnRankZeroAlone) {
  testing::ScopedEnv env;
  const auto [one, one_ckpt] = one_process_with_checkpoints(dir, env);
  const fs::path folder = dir / "saved-for-rank0";
  env.set("FSDP_WORKER_SAVE", folder.string());
  const auto saving = run_worker(launch(2, {FSDP_WORKER, (dir / "x.pt").string(), "FULL_SHARD", "adamw", "0"}));
  ASSERT_EQ(saving.status, 0) << saving.output;
  const std::string ckpt = (folder / "ep0-ba3-rank0.pt").string();
  env.set("FSDP_WORKER_SAVE", "");
  env.set("FSDP_WORKER_LOAD", ckpt);
  env.set("FSDP_WORKER_RANK0_ONLY", "1");
  const std::string again = (dir / "again-rank0-only.pt").string();
  env.set("FSDP_WORKER_RESAVE", again);
  const auto loading = run_worker(launch(3, {FSDP_WORKER, (dir / "x.pt").string(), "FULL_SHARD", "adamw", "0"}));
  ASSERT_EQ(loading.status, 0) << loading.output;
  expect_same_state(ckpt, again, 0);
  env.set("FSDP_WORKER_RESAVE", "");
  const std::string resumed = (dir / "resumed-rank0-only.pt").string();
  const auto resuming = run_worker(launch(3, {FSDP_WORKER, resumed, "FULL_SHARD", "adamw", "0"}));
  ASSERT_EQ(resuming.status, 0) << resuming.output;
  expect_weights_near(one, resumed, " loaded on rank 0 only");

  env.set("FSDP_WORKER_LOAD", (dir / "missing.pt").string());
  const auto missing = run_worker(launch(3, {FSDP_WORKER, (dir / "y.pt").string(), "FULL_SHARD", "adamw", "0"}));
  env.set("FSDP_WORKER_RANK0_ONLY", "");
  env.set("FSDP_WORKER_LOAD", "");
  EXPECT_NE(missing.status, 0);
  // Ranks 1 and 2 report rank 0's error; they never tried their own (nonexistent) path.
  EXPECT_NE(
      missing.output.find("[rank 2] fsdp_worker: rank 0 could not load the checkpoint (load_monolith_rank0_only): "
                          "checkpoint '" +
                          (dir / "missing.pt").string() + "' cannot be opened"),
      std::string::npos)
      << missing.output;
  EXPECT_EQ(missing.output.find(".not-on-this-rank"), std::string::npos) << missing.output;
}

// save_async under FSDP: sharded checkpoints (each rank's file written on a background thread, the .metadata when
// the ranks next meet) and full ones (rank 0's file on its thread) hold what the one-process run's checkpoint holds,
// and training goes on to the same weights.
TEST_F(FsdpTest, AsyncSavesHoldTheOneProcessState) {
  testing::ScopedEnv env;
  const auto [one, one_ckpt] = one_process_with_checkpoints(dir, env);
  env.set("FSDP_WORKER_SAVE_ASYNC", "1");
  for (const bool sharded : {true, false}) {
    SCOPED_TRACE(sharded ? "sharded" : "full");
    env.set("FSDP_WORKER_SHARDED", sharded ? "1" : "");
    const fs::path folder = dir / (sharded ? "async_sharded" : "async_full");
    env.set("FSDP_WORKER_SAVE", folder.string());
    const std::string out = (dir / (sharded ? "async_sharded.pt" : "async_full.pt")).string();
    const auto run = run_worker(launch(2, {FSDP_WORKER, out, "FULL_SHARD", "adamw", "0"}));
    ASSERT_EQ(run.status, 0) << run.output;
    for (const char* name : {"ep0-ba3", "ep0-ba6"}) {
      const fs::path ckpt = folder / (sharded ? std::string(name) : std::string(name) + "-rank0.pt");
      EXPECT_TRUE(sharded ? fs::exists(ckpt / ".metadata") : fs::exists(ckpt)) << ckpt;
    }
    EXPECT_TRUE(fs::exists(folder / "latest-rank0.pt")) << run.output;
    expect_same_state(one_ckpt, (folder / (sharded ? "ep0-ba3" : "ep0-ba3-rank0.pt")).string(), 1e-10);
    expect_weights_near(one, out, sharded ? " async sharded" : " async full");
  }
}

// state_dict_type sharded: PyTorch's DCP layout, one file per rank and the metadata. Saved on N ranks at batch 3,
// it holds the one-process run's state (within 1e-10), PyTorch's torch.distributed.checkpoint reads it into
// exactly the same tensors, M ranks resume from it to the one-process run's weights, and a directory whose save
// did not finish (no .metadata) is never loaded.
TEST_F(FsdpTest, ShardedCheckpointsAreDcpAndResumeOnAnotherWorldSize) {
  testing::ScopedEnv env;
  const auto [one, one_ckpt] = one_process_with_checkpoints(dir, env);
  env.set("FSDP_WORKER_SHARDED", "1");
  for (const auto& [saved_on, resumed_on] : std::vector<std::pair<int, int>>{{2, 3}, {4, 2}, {3, 1}}) {
    const std::string tag = std::to_string(saved_on) + "to" + std::to_string(resumed_on);
    const fs::path folder = dir / ("sharded" + tag);
    env.set("FSDP_WORKER_SAVE", folder.string());
    env.set("FSDP_WORKER_LOAD", "");
    env.set("FSDP_WORKER_ONE_UNIT", saved_on == 4 ? "1" : "");  // as in the full-checkpoint test
    const auto saving =
        run_worker(launch(saved_on, {FSDP_WORKER, (dir / "x.pt").string(), "FULL_SHARD", "adamw", "0"}));
    env.set("FSDP_WORKER_ONE_UNIT", "");
    ASSERT_EQ(saving.status, 0) << saving.output;
    const fs::path ckpt = folder / "ep0-ba3";
    ASSERT_TRUE(fs::exists(ckpt / ".metadata")) << saving.output;
    for (int rank = 0; rank < saved_on; ++rank) EXPECT_TRUE(fs::exists(ckpt / distcp_file_name(rank))) << rank;
    EXPECT_FALSE(fs::exists(ckpt / distcp_file_name(saved_on)));
    expect_same_state(one_ckpt, ckpt.string(), 1e-10);

    // PyTorch reads it: torch.distributed.checkpoint's own reader and planner, into one torch.save file.
    const std::string converted = (dir / ("converted" + tag + ".pt")).string();
    const auto py = torch_save_of_dcp(ckpt, converted);
    ASSERT_EQ(py.status, 0) << py.output;
    expect_same_state(ckpt.string(), converted, 0);

    env.set("FSDP_WORKER_SAVE", "");
    env.set("FSDP_WORKER_LOAD", ckpt.string());
    const std::string resumed = (dir / ("resumed" + tag + ".pt")).string();
    const auto resuming = run_worker(launch(resumed_on, {FSDP_WORKER, resumed, "FULL_SHARD", "adamw", "0"}));
    ASSERT_EQ(resuming.status, 0) << resuming.output;
    expect_weights_near(one, resumed, " resumed " + tag);
  }
  // A save killed before its metadata (the rank files of ep0-ba6 without .metadata): autoresume passes over it and
  // resumes from ep0-ba3, to the same weights; loading it directly is an error naming why.
  const fs::path partial = dir / "sharded2to3" / "ep0-ba6";
  ASSERT_TRUE(fs::remove(partial / ".metadata"));
  const auto resumed = autoresume_from(env, (dir / "sharded2to3").string());
  const std::string again = (dir / "autoresumed.pt").string();
  ASSERT_EQ(resumed.status, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("ep0-ba3' at batch 3"), std::string::npos) << resumed.output;
  expect_weights_near(one, again, " autoresumed");
  env.set("FSDP_WORKER_AUTORESUME", "");
  env.set("FSDP_WORKER_SAVE", "");
  fs::remove(partial / ".metadata");  // saved again by the resumed run; unfinished again
  env.set("FSDP_WORKER_LOAD", partial.string());
  const auto refused = run_worker(launch(2, {FSDP_WORKER, (dir / "y.pt").string(), "FULL_SHARD", "adamw", "0"}));
  EXPECT_NE(refused.status, 0);
  EXPECT_NE(refused.output.find("has no .metadata: the save that made it did not finish"), std::string::npos)
      << refused.output;
  EXPECT_FALSE(fs::exists(dir / "y.pt"));
}

// Frozen parameters (requires_grad false: LoRA's base, a frozen layer) are sharded like the trainable ones, as torch
// FSDP shards them: each rank keeps 1/N of all 408 elements, gathers a frozen unit for its forward (and for its
// backward when its input needs a gradient) and reduces no gradient for it. Frozen biases (every unit half frozen), a
// frozen first unit and a frozen last unit (kept in the optimizer's groups) reach one process's weights within 1e-10,
// gathered whole and per unit, with microbatches, clipping and activation checkpointing, and with EMA, SAM and SWA; a
// sharded checkpoint holds the frozen parts as one process's file holds them, and 3 ranks resume from it to one
// process's weights.
TEST_F(FsdpTest, FrozenParametersAreShardedAndEqualOneProcess) {
  testing::ScopedEnv env;
  for (const char* freeze : {"bias", "first", "last"}) {
    env.set("FSDP_WORKER_FREEZE", freeze);
    env.set("FSDP_WORKER_NN_LAYERS", "");
    expect_equal_to_one_process(2, "FULL_SHARD", "adamw", "0");
    env.set("FSDP_WORKER_NN_LAYERS", "1");  // each unit gathered around its own passes
    expect_equal_to_one_process(2, "FULL_SHARD", "adamw", "0");
    expect_equal_to_one_process(3, "SHARD_GRAD_OP", "sgdw", "3", "norm:0.05");
    env.set("FSDP_WORKER_ACTIVATION_CHECKPOINTING", "1");  // each unit recomputed in the backward
    expect_equal_to_one_process(2, "FULL_SHARD", "adamw", "0");
    env.set("FSDP_WORKER_ACTIVATION_CHECKPOINTING", "");
  }
  env.set("FSDP_WORKER_NN_LAYERS", "");
  env.set("FSDP_WORKER_FREEZE", "bias");
  for (const char* algorithm : {"ema", "sam", "swa"}) {
    env.set("FSDP_WORKER_ALGORITHM", algorithm);
    expect_equal_to_one_process(2, "FULL_SHARD", "adamw", "0");
  }
  env.set("FSDP_WORKER_ALGORITHM", "");
  env.set("FSDP_WORKER_FREEZE", "first");
  const auto [one, one_ckpt] = one_process_with_checkpoints(dir, env);
  env.set("FSDP_WORKER_SHARDED", "1");
  env.set("FSDP_WORKER_SAVE", (dir / "frozen").string());
  const auto saving = run_worker(launch(2, {FSDP_WORKER, (dir / "x.pt").string(), "FULL_SHARD", "adamw", "0"}));
  ASSERT_EQ(saving.status, 0) << saving.output;
  const fs::path ckpt = dir / "frozen" / "ep0-ba3";
  // 4 parameters, and DecoupledAdamW's step, exp_avg and exp_avg_sq of the 2 trainable ones
  EXPECT_EQ(testing::expect_same_checkpoint_state(one_ckpt, ckpt.string(), 1e-10), 4 + 2 * 3);
  env.set("FSDP_WORKER_SAVE", "");
  env.set("FSDP_WORKER_LOAD", ckpt.string());
  const std::string resumed = (dir / "frozen-resumed.pt").string();
  const auto resuming = run_worker(launch(3, {FSDP_WORKER, resumed, "FULL_SHARD", "adamw", "0"}));
  ASSERT_EQ(resuming.status, 0) << resuming.output;
  expect_weights_near(one, resumed, " resumed with the first Linear frozen");
}

// A sharded checkpoint saved under HYBRID_SHARD (4 ranks, 2 shard groups of 2) holds each element once (the first
// replica's parts; the others' rank files hold none), equals the one-process checkpoint, PyTorch reads it, and 3
// FULL_SHARD ranks resume from it to the one-process weights.
TEST_F(FsdpTest, HybridShardShardedCheckpointsResumeElsewhere) {
  testing::ScopedEnv env;
  const auto [one, one_ckpt] = one_process_with_checkpoints(dir, env);
  env.set("FSDP_WORKER_SHARDED", "1");
  env.set("FSDP_WORKER_REPLICATE", "2");
  env.set("FSDP_WORKER_SAVE", (dir / "hybrid").string());
  const auto saving = run_worker(launch(4, {FSDP_WORKER, (dir / "x.pt").string(), "HYBRID_SHARD", "adamw", "0"}));
  ASSERT_EQ(saving.status, 0) << saving.output;
  const fs::path ckpt = dir / "hybrid" / "ep0-ba3";
  ASSERT_TRUE(fs::exists(ckpt / ".metadata")) << saving.output;
  expect_same_state(one_ckpt, ckpt.string(), 1e-10);
  const std::string converted = (dir / "hybrid.pt").string();
  const auto py = torch_save_of_dcp(ckpt, converted);
  ASSERT_EQ(py.status, 0) << py.output;
  expect_same_state(ckpt.string(), converted, 0);
  env.set("FSDP_WORKER_REPLICATE", "");
  env.set("FSDP_WORKER_SAVE", "");
  env.set("FSDP_WORKER_LOAD", ckpt.string());
  const std::string resumed = (dir / "resumed.pt").string();
  const auto resuming = run_worker(launch(3, {FSDP_WORKER, resumed, "FULL_SHARD", "adamw", "0"}));
  ASSERT_EQ(resuming.status, 0) << resuming.output;
  expect_weights_near(one, resumed, " resumed from HYBRID_SHARD");
  // And on HYBRID_SHARD again: each replica reads its shard group's part.
  env.set("FSDP_WORKER_REPLICATE", "2");
  const std::string hybrid_again = (dir / "resumed-hybrid.pt").string();
  const auto again = run_worker(launch(4, {FSDP_WORKER, hybrid_again, "HYBRID_SHARD", "adamw", "0"}));
  ASSERT_EQ(again.status, 0) << again.output;
  expect_weights_near(one, hybrid_again, " resumed from HYBRID_SHARD on HYBRID_SHARD");
}

// Each rank reads only its part of a sharded checkpoint, so a damaged rank file fails the ranks that need it, and
// through them every rank. Saved on 4 ranks as one unit, the batch-6 checkpoint with rank 3's file cut in half:
// loading it on 2 ranks (one unit: rank 0's half is what ranks 0 and 1 saved) is a clear error on both (rank 0
// reports rank 1's failure) and writes nothing; autoresume sets it aside (.corrupt) and resumes from batch 3 to the
// one-process run's weights.
TEST_F(FsdpTest, ADamagedRankFileFailsEveryRankAndAutoresumeFallsBack) {
  testing::ScopedEnv env;
  const auto [one, one_ckpt] = one_process_with_checkpoints(dir, env);
  env.set("FSDP_WORKER_SHARDED", "1");
  const fs::path folder = dir / "sharded";
  env.set("FSDP_WORKER_SAVE", folder.string());
  env.set("FSDP_WORKER_ONE_UNIT", "1");
  const auto saving = run_worker(launch(4, {FSDP_WORKER, (dir / "x.pt").string(), "FULL_SHARD", "adamw", "0"}));
  ASSERT_EQ(saving.status, 0) << saving.output;
  const fs::path damaged = folder / "ep0-ba6" / distcp_file_name(3);
  ASSERT_TRUE(fs::exists(damaged)) << saving.output;
  fs::resize_file(damaged, fs::file_size(damaged) / 2);

  env.set("FSDP_WORKER_SAVE", "");
  env.set("FSDP_WORKER_LOAD", (folder / "ep0-ba6").string());
  const auto refused = run_worker(launch(2, {FSDP_WORKER, (dir / "y.pt").string(), "FULL_SHARD", "adamw", "0"}));
  EXPECT_NE(refused.status, 0);
  EXPECT_NE(refused.output.find("rank 1 could not read it: sharded checkpoint"), std::string::npos) << refused.output;
  EXPECT_NE(refused.output.find("'__3_0.distcp' is truncated"), std::string::npos) << refused.output;
  EXPECT_FALSE(fs::exists(dir / "y.pt"));

  const auto resumed = autoresume_from(env, folder.string());
  const std::string again = (dir / "autoresumed.pt").string();
  ASSERT_EQ(resumed.status, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("ep0-ba6.corrupt' and trying the previous checkpoint"), std::string::npos)
      << resumed.output;
  EXPECT_NE(resumed.output.find("ep0-ba3' at batch 3"), std::string::npos) << resumed.output;
  EXPECT_TRUE(fs::exists(folder / "ep0-ba6.corrupt" / distcp_file_name(3)));
  expect_weights_near(one, again, " autoresumed past a damaged checkpoint");
}

// A full checkpoint whose tensor bytes were damaged (one byte of its largest record flipped), loaded on 2 FULL_SHARD
// ranks that each read only their parts and verify only their share of the records' CRC-32s: a clear error on every
// rank, naming the failed check, and nothing written; autoresume sets it aside (.corrupt) and resumes from batch 3
// to the one-process run's weights.
TEST_F(FsdpTest, ADamagedFullCheckpointFailsEveryRankAndAutoresumeFallsBack) {
  testing::ScopedEnv env;
  const auto [one, one_ckpt] = one_process_with_checkpoints(dir, env);
  const fs::path damaged = dir / "one" / "ep0-ba6-rank0.pt";
  ASSERT_TRUE(fs::exists(damaged));
  const auto flipped = testing::run_python(
      {"-c",
       "import sys, zipfile, struct\n"
       "i = max(zipfile.ZipFile(sys.argv[1]).infolist(), key=lambda i: i.file_size)\n"
       "f = open(sys.argv[1], 'r+b'); f.seek(i.header_offset + 26); n, e = struct.unpack('<HH', f.read(4))\n"
       "at = i.header_offset + 30 + n + e + i.file_size // 2; f.seek(at); b = f.read(1); f.seek(at)\n"
       "f.write(bytes([b[0] ^ 0xFF]))",
       damaged.string()});
  ASSERT_EQ(flipped.status, 0) << flipped.output;

  env.set("FSDP_WORKER_SAVE", "");
  env.set("FSDP_WORKER_LOAD", damaged.string());
  const auto refused = run_worker(launch(2, {FSDP_WORKER, (dir / "y.pt").string(), "FULL_SHARD", "adamw", "0"}));
  EXPECT_NE(refused.status, 0);
  EXPECT_NE(refused.output.find("fails its CRC-32 check"), std::string::npos) << refused.output;
  EXPECT_FALSE(fs::exists(dir / "y.pt"));

  const auto resumed = autoresume_from(env, (dir / "one").string());
  const std::string again = (dir / "autoresumed.pt").string();
  ASSERT_EQ(resumed.status, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("ep0-ba6-rank0.pt.corrupt' and trying the previous checkpoint"), std::string::npos)
      << resumed.output;
  expect_weights_near(one, again, " autoresumed past a damaged full checkpoint");
}

// Composer's own sharded checkpoint (Composer 0.32.1's Trainer with torch FSDP on 2 ranks, tests/peer/
// composer_fsdp_checkpoint.py) loads into 3 C++ FULL_SHARD ranks: the model, DecoupledAdamW's state in both groups
// and the timestamp are bitwise what Composer saved (loaded, then written again as a full checkpoint and compared
// with PyTorch's reading of Composer's directory).
TEST_F(FsdpTest, ComposersShardedCheckpointLoadsOnAnotherWorldSize) {
  COMPOSER_REQUIRE_PYTHON("composer");
  const std::string folder = (dir / "composer").string();
  const auto saving = testing::run_python({"-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                                           testing::peer_script("composer_fsdp_checkpoint.py"), folder});
  ASSERT_EQ(saving.status, 0) << saving.output;
  const fs::path ckpt = fs::path(folder) / "ep0-ba3";
  ASSERT_TRUE(fs::exists(ckpt / ".metadata")) << saving.output;
  const std::string converted = (dir / "composer.pt").string();
  const auto py = torch_save_of_dcp(ckpt, converted);
  ASSERT_EQ(py.status, 0) << py.output;
  testing::ScopedEnv env;
  env.set("FSDP_WORKER_LOAD", ckpt.string());
  const std::string resaved = (dir / "resaved.pt").string();
  env.set("FSDP_WORKER_RESAVE", resaved);
  const auto loading = run_worker(launch(3, {FSDP_WORKER, (dir / "x.pt").string(), "FULL_SHARD", "adamw", "0"}));
  ASSERT_EQ(loading.status, 0) << loading.output;
  EXPECT_NE(loading.output.find("ep0-ba3' (batch 3)"), std::string::npos) << loading.output;
  // Composer's param_groups carry torch's extra flags (foreach, fused, ...) and its timestamp timedeltas: compare
  // the tensors, the optimizer steps and the counters.
  const auto composers = testing::checkpoint_leaves(converted), ours = testing::checkpoint_leaves(resaved);
  int64_t tensors = 0;
  for (const auto& [key, value] : composers) {
    const bool compared = key.rfind("model/", 0) == 0 || key.rfind("optimizers/DecoupledAdamW/state/", 0) == 0 ||
                          key == "timestamp/Timestamp/batch" || key == "timestamp/Timestamp/sample" ||
                          key == "timestamp/Timestamp/epoch";
    if (!compared) continue;
    ASSERT_TRUE(ours.count(key)) << key;
    if (value.isTensor()) {
      ++tensors;
      EXPECT_TRUE(at::equal(value.toTensor(), ours.at(key).toTensor())) << key;
    } else {
      EXPECT_TRUE(value == ours.at(key)) << key << ": " << value << " vs " << ours.at(key);
    }
  }
  EXPECT_EQ(tensors, 4 + 4 * 3);
  EXPECT_TRUE(composers.at("timestamp/Timestamp/batch") == c10::IValue(int64_t{3}));
}

// GET requests for `path` ("/bucket/key") in the moto server's log, those answered `status` ("206") or all.
int64_t gets_in_log(const testing::MotoServer& server, const std::string& path, const std::string& status = "") {
  const std::string log = server.server_log(), request = "GET " + path + " HTTP";
  int64_t n = 0;
  for (auto at = log.find(request); at != std::string::npos; at = log.find(request, at + 1)) {
    const std::string line = log.substr(at, log.find('\n', at) - at);
    if (status.empty() || line.find("\" " + status + " ") != std::string::npos) ++n;
  }
  return n;
}

// A full checkpoint in S3 (state_dict_type full: one object) loads on 3 FULL_SHARD ranks without being downloaded:
// each rank reads by ranged requests (206) its share of the CRC-32 checks, the pickle and its parts of the tensors,
// and trains on to the one-process run's weights.
TEST_F(FsdpTest, FullCheckpointsInS3AreReadByRangesUnderFullShard) {
  COMPOSER_REQUIRE_PYTHON("moto boto3");
  testing::ScopedEnv env;
  const auto [one, one_ckpt] = one_process_with_checkpoints(dir, env);
  testing::MotoServer server(dir / "server", {"ckpt"});
  env.set("FSDP_WORKER_SAVE", "s3://ckpt/full");
  const auto saving = run_worker(launch(2, {FSDP_WORKER, (dir / "x.pt").string(), "FULL_SHARD", "adamw", "0"}));
  ASSERT_EQ(saving.status, 0) << saving.output;
  env.set("FSDP_WORKER_SAVE", "");
  env.set("FSDP_WORKER_LOAD", "s3://ckpt/full/ep0-ba3-rank0.pt");
  const auto gets = [&](const std::string& status) {
    return gets_in_log(server, "/ckpt/full/ep0-ba3-rank0.pt", status);
  };
  const int64_t whole_before = gets("200");
  const std::string resumed = (dir / "resumed-full-s3.pt").string();
  const auto loading = run_worker(launch(3, {FSDP_WORKER, resumed, "FULL_SHARD", "adamw", "0"}));
  ASSERT_EQ(loading.status, 0) << loading.output;
  expect_weights_near(one, resumed, " loaded from a full checkpoint in S3 on 3 ranks");
  std::cout << "ranged GETs of the checkpoint: " << gets("206") << "\n";
  EXPECT_GE(gets("206"), 3) << server.server_log();
  EXPECT_EQ(gets("200"), whole_before) << server.server_log();  // no rank downloaded it whole
}

// Sharded checkpoints in an object store (a real S3 server, moto, on loopback): every rank uploads its own file and
// rank 0 the .metadata after all of them; 3 ranks load a 2-rank checkpoint from its URI and train on to the
// one-process run's weights; autoresume passes over a folder whose .metadata never arrived (an interrupted upload),
// resumes from the complete one before it, saves that batch again, and retention deletes whole folders.
TEST_F(FsdpTest, ShardedCheckpointsInS3LoadAndAutoresumeOnAnotherWorldSize) {
  COMPOSER_REQUIRE_PYTHON("moto boto3");
  testing::ScopedEnv env;
  const auto [one, one_ckpt] = one_process_with_checkpoints(dir, env);
  testing::MotoServer server(dir / "server", {"ckpt"});
  env.set("FSDP_WORKER_SHARDED", "1");
  env.set("FSDP_WORKER_SAVE", "s3://ckpt/sharded");
  const auto saving = run_worker(launch(2, {FSDP_WORKER, (dir / "x.pt").string(), "FULL_SHARD", "adamw", "0"}));
  ASSERT_EQ(saving.status, 0) << saving.output;
  const auto keys = server.list("ckpt", "sharded/");
  for (const char* key : {"sharded/ep0-ba3/.metadata", "sharded/ep0-ba3/__0_0.distcp", "sharded/ep0-ba3/__1_0.distcp",
                          "sharded/ep0-ba6/.metadata", "sharded/ep0-ba6/__0_0.distcp", "sharded/ep0-ba6/__1_0.distcp"})
    EXPECT_NE(std::find(keys.begin(), keys.end(), key), keys.end()) << key << " not in the bucket";
  EXPECT_NE(saving.output.find("uploaded 2 checkpoint(s) to s3://ckpt/sharded"), std::string::npos) << saving.output;
  // What is in the bucket is the one-process run's state at batch 3.
  const fs::path fetched = dir / "fetched-ba3";
  ASSERT_EQ(server.boto("get_dir", {"ckpt", "sharded/ep0-ba3", fetched.string()}).status, 0);
  expect_same_state(one_ckpt, fetched.string(), 1e-10);

  env.set("FSDP_WORKER_SAVE", "");
  env.set("FSDP_WORKER_LOAD", "s3://ckpt/sharded/ep0-ba3");
  // The server's log of GET requests for a file of the checkpoint (`status` "206": ranged reads only).
  const auto gets = [&](const std::string& file, const std::string& status = "") {
    return gets_in_log(server, "/ckpt/sharded/ep0-ba3/" + file, status);
  };
  const int64_t first_before = gets("__0_0.distcp"), second_before = gets("__1_0.distcp"),
                ranged_before = gets("__0_0.distcp", "206") + gets("__1_0.distcp", "206");
  const std::string resumed = (dir / "resumed-s3.pt").string();
  const auto loading = run_worker(launch(3, {FSDP_WORKER, resumed, "FULL_SHARD", "adamw", "0"}));
  ASSERT_EQ(loading.status, 0) << loading.output;
  expect_weights_near(one, resumed, " loaded from S3 on 3 ranks");
  // Each rank reads only the files it needs, by ranged reads (S3 answers 206): rank 0 of 3 holds the first third of
  // each flat buffer, inside the first half that rank 0 of 2 wrote, so it never fetches the second rank's file; the
  // stored values (rank 0's file) every rank reads. These files are small: one request each (a 4 MiB read-ahead).
  EXPECT_EQ(gets("__1_0.distcp") - second_before, 2) << server.server_log();
  EXPECT_EQ(gets("__0_0.distcp") - first_before, 3);
  EXPECT_EQ(gets("__0_0.distcp", "206") + gets("__1_0.distcp", "206") - ranged_before, 5);

  // ep0-ba6's upload "interrupted" before its .metadata: it is not a checkpoint. Loading it names why; autoresume
  // takes ep0-ba3 (although the latest pointer names ep0-ba6), saves ep0-ba6 again, and keeps only it.
  ASSERT_EQ(server.boto("delete", {"ckpt", "sharded/ep0-ba6/.metadata"}).status, 0);
  env.set("FSDP_WORKER_LOAD", "s3://ckpt/sharded/ep0-ba6");
  const auto refused = run_worker(launch(2, {FSDP_WORKER, (dir / "y.pt").string(), "FULL_SHARD", "adamw", "0"}));
  EXPECT_NE(refused.status, 0);
  EXPECT_NE(refused.output.find("s3://ckpt/sharded/ep0-ba6 has no .metadata: the save that made it did not finish"),
            std::string::npos)
      << refused.output;
  env.set("FSDP_WORKER_LOAD", "");
  env.set("FSDP_WORKER_SAVE", "s3://ckpt/sharded");
  env.set("FSDP_WORKER_AUTORESUME", "1");
  env.set("FSDP_WORKER_KEEP", "1");
  const std::string again = (dir / "autoresumed-s3.pt").string();
  const auto autoresumed = run_worker(launch(2, {FSDP_WORKER, again, "FULL_SHARD", "adamw", "0"}));
  env.set("FSDP_WORKER_AUTORESUME", "");
  env.set("FSDP_WORKER_KEEP", "");
  ASSERT_EQ(autoresumed.status, 0) << autoresumed.output;
  EXPECT_NE(autoresumed.output.find("s3://ckpt/sharded/ep0-ba3' at batch 3"), std::string::npos) << autoresumed.output;
  expect_weights_near(one, again, " autoresumed from S3");
  const auto after = server.list("ckpt", "sharded/");
  for (const auto& key : after) EXPECT_EQ(key.rfind("sharded/ep0-ba3/", 0), std::string::npos) << key << " kept";
  EXPECT_NE(std::find(after.begin(), after.end(), "sharded/ep0-ba6/.metadata"), after.end());
}

TEST_F(FsdpTest, UnsupportedSettingsAreClearErrors) {
  const auto r = run_worker({FSDP_WORKER, (dir / "x.pt").string(), "HALF_SHARD", "adamw", "0"});
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("STRATEGY must be FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD or "
                          "_HYBRID_SHARD_ZERO2, got 'HALF_SHARD'"),
            std::string::npos)
      << r.output;
  testing::ScopedEnv env;
  env.set("FSDP_WORKER_REPLICATE", "1");
  const auto no_shard = run_worker({FSDP_WORKER, (dir / "x.pt").string(), "NO_SHARD", "adamw", "0"});
  EXPECT_NE(no_shard.status, 0);
  EXPECT_NE(no_shard.output.find("sharding_strategy NO_SHARD with data_parallel_replicate_degree: NO_SHARD "
                                 "replicates on every rank already"),
            std::string::npos)
      << no_shard.output;
  env.set("FSDP_WORKER_REPLICATE", "");
  EXPECT_FALSE(fs::exists(dir / "x.pt"));
  const auto adaptive = run_worker({FSDP_WORKER, (dir / "y.pt").string(), "FULL_SHARD", "adamw", "0", "adaptive:0.1"});
  EXPECT_NE(adaptive.status, 0);
  EXPECT_NE(adaptive.output.find("'adaptive' does not work with parallelism_config.fsdp"), std::string::npos)
      << adaptive.output;
  EXPECT_FALSE(fs::exists(dir / "y.pt"));
}

}  // namespace
}  // namespace composer
