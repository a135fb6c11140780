// Deferred initialization under FSDP on real processes (composer-cpp launch, Gloo): a Llama built with
// nn::DeferredInit is drawn unit by unit and sharded as it is drawn; it starts bitwise where a one-process build
// starts and trains bitwise as the same model built whole; a model whose weights and gradients (its full fp32
// training state) are about twice each rank's address-space budget (RLIMIT_AS) trains on 4 ranks under it and
// resumes from its sharded checkpoint, with a setup peak of about 1/N of the model plus a unit.
#include "support/run_files.h"
#include "support/scoped_env.h"
#include "support/worker_run.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <filesystem>

#include <unistd.h>

namespace composer {
namespace {

namespace fs = std::filesystem;
using testing::run_worker;

struct DeferredInitDistTest : ::testing::Test {
  fs::path dir = fs::temp_directory_path() / ("composer_deferred_" + std::to_string(::getpid()));
  void SetUp() override { fs::create_directories(dir); }
  void TearDown() override { fs::remove_all(dir); }

  testing::WorkerResult run(int ranks, const std::string& out, const std::string& mode, const std::string& strategy) {
    const std::vector<std::string> argv{DEFERRED_WORKER, out, mode, strategy};
    return run_worker(ranks == 1 ? argv : testing::launch_argv(COMPOSER_CPP, ranks, argv), 600);
  }
};

void expect_bitwise_equal(const fs::path& a, const fs::path& b, const std::string& what) {
  const auto x = testing::read_pickled_tensors(a), y = testing::read_pickled_tensors(b);
  ASSERT_FALSE(x.empty()) << a;
  ASSERT_EQ(x.size(), y.size()) << what;
  for (const auto& [name, t] : x) {
    ASSERT_TRUE(y.count(name)) << name << " (" << what << ")";
    EXPECT_TRUE(at::equal(t, y.at(name))) << name << " (" << what << ")";
  }
}

TEST_F(DeferredInitDistTest, FullShardDrawsAndTrainsBitwiseAsANormalBuild) {
  const auto one = run(1, (dir / "one.pt").string(), "normal", "one");
  ASSERT_EQ(one.status, 0) << one.output;
  for (const int ranks : {2, 3}) {
    const std::string tag = std::to_string(ranks);
    const auto normal = run(ranks, (dir / ("normal" + tag + ".pt")).string(), "normal", "FULL_SHARD");
    ASSERT_EQ(normal.status, 0) << normal.output;
    const auto deferred = run(ranks, (dir / ("deferred" + tag + ".pt")).string(), "deferred", "FULL_SHARD");
    ASSERT_EQ(deferred.status, 0) << deferred.output;
    // The shards hold a one-process build's weights, and train as the same model built whole and then sharded.
    expect_bitwise_equal(dir / "one.pt.init", dir / ("deferred" + tag + ".pt.init"), "initial, " + tag + " ranks");
    expect_bitwise_equal(dir / ("normal" + tag + ".pt"), dir / ("deferred" + tag + ".pt"), "trained, " + tag + " ranks");
  }
}

// The model: 32 decoder layers of hidden 384 (MLP 1024) and a 4096-token vocabulary, 53.5M parameters, 204 MiB of
// fp32 weights, each layer a unit of 6.2 MiB. Each rank's budget is 204 MiB of address space above what its runtime
// maps, half the weights and gradients (408 MiB) one process would hold: the whole model cannot be built under it.
// A rank keeps its quarter of the weights and of their gradients (DecoupledSGDW without momentum keeps nothing
// else) and gathers units around their passes: measured 186 MiB at most. glibc's allocator is pinned (one arena, a
// fixed mmap threshold) so that the address space follows what is allocated rather than glibc's reserves.
TEST_F(DeferredInitDistTest, AModelTwiceTheBudgetTrainsOnFourRanksAndResumes) {
  testing::ScopedEnv env;
  env.set("MALLOC_ARENA_MAX", "1");
  env.set("MALLOC_MMAP_THRESHOLD_", "1048576");
  env.set("DEFERRED_WORKER_LAYERS", "32");
  env.set("DEFERRED_WORKER_HIDDEN", "384");
  env.set("DEFERRED_WORKER_INTERMEDIATE", "1024");
  env.set("DEFERRED_WORKER_VOCAB", "4096");
  env.set("DEFERRED_WORKER_BUDGET_MIB", "204");
  env.set("DEFERRED_WORKER_SAVE", (dir / "ckpt").string());
  const auto trained = run(4, "-", "deferred", "FULL_SHARD");
  ASSERT_EQ(trained.status, 0) << trained.output;
  const auto model = testing::printed_values(trained.output, "model_mib ", "[rank 0] ");
  const auto unit = testing::printed_values(trained.output, "unit_mib ", "[rank 0] ");
  ASSERT_EQ(model.size(), 1u) << trained.output;
  ASSERT_EQ(unit.size(), 1u);
  EXPECT_NEAR(model[0], 204, 1);
  for (int rank = 0; rank < 4; ++rank) {
    const std::string tag = "[rank " + std::to_string(rank) + "] ";
    const auto setup = testing::printed_values(trained.output, "setup_vm_mib ", tag);
    ASSERT_EQ(setup.size(), 1u) << trained.output;
    // 1/N of the model, a unit drawn whole and its shard, and the Trainer's own setup (measured: 71 MiB in all).
    EXPECT_LT(setup[0], model[0] / 4 + 2 * unit[0] + 20) << tag << trained.output;
  }
  ASSERT_TRUE(fs::exists(dir / "ckpt" / "ep0-ba2" / ".metadata")) << trained.output;

  // Resumed from its sharded checkpoint under the same budget, two batches more: the loss of a run of four batches.
  env.set("DEFERRED_WORKER_SAVE", "");
  env.set("DEFERRED_WORKER_LOAD", (dir / "ckpt" / "ep0-ba2").string());
  const auto resumed = run(4, "-", "deferred", "FULL_SHARD");
  ASSERT_EQ(resumed.status, 0) << resumed.output;
  EXPECT_EQ(testing::printed_values(resumed.output, "start_batch ", "[rank 0] "), std::vector<double>{2});
  env.set("DEFERRED_WORKER_LOAD", "");
  env.set("DEFERRED_WORKER_STEPS", "4");
  const auto straight = run(4, "-", "deferred", "FULL_SHARD");
  ASSERT_EQ(straight.status, 0) << straight.output;
  const auto loss = testing::printed_values(resumed.output, "loss ", "[rank 0] ");
  ASSERT_EQ(loss.size(), 1u) << resumed.output;
  EXPECT_EQ(loss, testing::printed_values(straight.output, "loss ", "[rank 0] "));

  // The limit is real: the same model built whole fails under it.
  env.set("DEFERRED_WORKER_STEPS", "");
  const auto whole = run(4, "-", "normal", "FULL_SHARD");
  EXPECT_NE(whole.status, 0) << whole.output;
  EXPECT_NE(whole.output.find("can't allocate memory"), std::string::npos) << whole.output;
}

}  // namespace
}  // namespace composer
