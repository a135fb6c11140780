// Automatic microbatching under a real memory limit (auto_microbatch_worker caps its address space with RLIMIT_AS
// once the first batch is loaded): the search shrinks the microbatch until the step fits, and the run then equals
// one configured with that size from the start; the train batch size is 4096, the eval batch size 4096.
#include "support/run_files.h"
#include "support/scoped_env.h"
#include "support/worker_run.h"

#include "composer/composer.h"

#include <torch/cuda.h>

#include <gtest/gtest.h>

#include <filesystem>

namespace composer {
namespace {

namespace fs = std::filesystem;
using testing::printed_values;
using testing::run_worker;

// The whole batch needs about 100 MiB of activations (4096 x 1024 floats, several times), 512 samples a
// sixteenth of that; 40 MiB over what the process maps at the first batch lets some sizes in between fit.
constexpr const char* kBudgetMiB = "40";

struct AutoMicrobatchTest : ::testing::Test {
  fs::path dir = fs::temp_directory_path() / ("composer_auto_mb_" + std::to_string(::getpid()));
  void SetUp() override { fs::create_directories(dir); }
  void TearDown() override { fs::remove_all(dir); }

  testing::WorkerResult train(const std::string& name, const std::string& train_mb, const std::string& eval_mb,
                              const std::string& budget, const std::string& limited, const std::string& device = "") {
    std::vector<std::string> argv{AUTO_MICROBATCH_WORKER, (dir / name).string(), train_mb, eval_mb, budget, limited};
    if (!device.empty()) argv.push_back(device);
    return run_worker(argv);
  }
  void expect_same_weights(const std::string& a, const std::string& b) {
    const auto x = testing::read_pickled_tensors(dir / a), y = testing::read_pickled_tensors(dir / b);
    ASSERT_EQ(x.size(), y.size());
    for (const auto& [name, t] : x) EXPECT_TRUE(t.equal(y.at(name))) << name << ": " << a << " vs " << b;
  }
};

TEST_F(AutoMicrobatchTest, KeepsTheWholeBatchWhenItFits) {
  const auto automatic = train("auto.pt", "auto", "auto", "0", "-1");
  ASSERT_EQ(automatic.status, 0) << automatic.output;
  EXPECT_EQ(printed_values(automatic.output, "train_microbatch "), std::vector<double>(4, 4096));
  EXPECT_EQ(printed_values(automatic.output, "eval_microbatch "), std::vector<double>(2, 4096));
  const auto whole = train("whole.pt", "0", "0", "0", "-1");
  ASSERT_EQ(whole.status, 0) << whole.output;
  EXPECT_EQ(printed_values(whole.output, "train_microbatch "), std::vector<double>(4, 4096));  // logged always
  expect_same_weights("auto.pt", "whole.pt");
}

// The limit is real: the whole batch fails under it. "auto" under the same limit halves until the step fits, logs
// every step's size, and ends with the weights (dropout masks included: the generators are put back before a
// redo) and accuracy of a run with that size from the start and no limit.
TEST_F(AutoMicrobatchTest, ShrinksUnderAMemoryLimitAndEqualsThatSizeFromTheStart) {
  const auto whole = train("whole.pt", "0", "0", kBudgetMiB, "0");
  EXPECT_NE(whole.status, 0) << whole.output;
  EXPECT_NE(whole.output.find("DefaultCPUAllocator"), std::string::npos) << whole.output;

  const auto automatic = train("auto.pt", "auto", "512", kBudgetMiB, "0");
  ASSERT_EQ(automatic.status, 0) << automatic.output;
  const auto sizes = printed_values(automatic.output, "train_microbatch ");
  ASSERT_EQ(sizes.size(), 4u) << automatic.output;
  const double found = sizes.front();
  EXPECT_LT(found, 4096) << automatic.output;
  EXPECT_GE(found, 1);
  for (double s : sizes) EXPECT_EQ(s, found) << "the size found at the first batch fits the others";
  EXPECT_NE(automatic.output.find("out of memory at device_train_microbatch_size 4096; redoing batch 0 with 2048"),
            std::string::npos)
      << automatic.output;

  const std::string size = std::to_string(static_cast<int64_t>(found));
  const auto fixed = train("fixed.pt", size, "512", "0", "-1");
  ASSERT_EQ(fixed.status, 0) << fixed.output;
  expect_same_weights("auto.pt", "fixed.pt");
  EXPECT_EQ(printed_values(automatic.output, "accuracy "), printed_values(fixed.output, "accuracy "));
}

// Evaluation searches its own size; the metric equals the one computed without a limit (the metrics of an
// abandoned attempt are put back, not counted twice).
TEST_F(AutoMicrobatchTest, EvaluationShrinksAndKeepsTheMetric) {
  const auto automatic = train("auto.pt", "256", "auto", "20", "0");  // no gradients: eval needs less
  ASSERT_EQ(automatic.status, 0) << automatic.output;
  const auto eval_sizes = printed_values(automatic.output, "eval_microbatch ");
  ASSERT_EQ(eval_sizes.size(), 2u) << automatic.output;
  EXPECT_LT(eval_sizes.front(), 4096) << automatic.output;
  const auto reference = train("reference.pt", "256", "0", "0", "-1");
  ASSERT_EQ(reference.status, 0) << reference.output;
  const auto accuracy = printed_values(automatic.output, "accuracy ");
  ASSERT_EQ(accuracy.size(), 1u) << automatic.output;
  EXPECT_EQ(accuracy, printed_values(reference.output, "accuracy "));
  expect_same_weights("auto.pt", "reference.pt");
}

// No memory to spare at all: the search reaches 1 sample, which does not fit either, and stops with a clear error
// instead of retrying forever.
TEST_F(AutoMicrobatchTest, OneSampleThatDoesNotFitIsAClearError) {
  const auto r = train("none.pt", "auto", "0", "0", "0");
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("ran out of memory with a microbatch of 1 sample"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("redoing batch 0 with 1\n"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir / "none.pt"));
}

// Memory that grows from batch to batch (the worker keeps 12 MiB more after each batch, as a callback storing every
// step's tensors would): the size shrinks at the first batch and at later ones, and the third batch that shrinks
// stops the run with the list of shrinks instead of halving on towards 1.
TEST_F(AutoMicrobatchTest, RepeatedShrinkingStopsWithAClearError) {
  testing::ScopedEnv env;
  env.set("AUTO_MICROBATCH_LEAK_MIB", "12");
  const auto r = train("leak.pt", "auto", "512", kBudgetMiB, "0");
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("device_train_microbatch_size shrank in 3 different batches (batch 0: 4096 -> "),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("memory in use grows from batch to batch"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir / "leak.pt"));
}

// On a GPU: the caching allocator's memory fraction is the limit, and CUDA's OutOfMemoryError drives the search.
TEST_F(AutoMicrobatchTest, ShrinksOnCudaOutOfMemory) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "needs a CUDA device (tools/device/run_checks.sh runs it)";
  const auto whole = train("whole.pt", "0", "0", kBudgetMiB, "0", "cuda");
  EXPECT_NE(whole.status, 0) << whole.output;
  EXPECT_NE(whole.output.find("CUDA out of memory"), std::string::npos) << whole.output;
  const auto automatic = train("auto.pt", "auto", "512", kBudgetMiB, "0", "cuda");
  ASSERT_EQ(automatic.status, 0) << automatic.output;
  const auto sizes = printed_values(automatic.output, "train_microbatch ");
  ASSERT_EQ(sizes.size(), 4u) << automatic.output;
  EXPECT_LT(sizes.front(), 4096) << automatic.output;
  const auto fixed = train("fixed.pt", std::to_string(static_cast<int64_t>(sizes.front())), "512", "0", "-1", "cuda");
  ASSERT_EQ(fixed.status, 0) << fixed.output;
  expect_same_weights("auto.pt", "fixed.pt");
}

}  // namespace
}  // namespace composer
