// Composer as the peer for checkpoints, both ways, in float64:
//   composer-cpp -> Composer: a checkpoint our Trainer wrote at batch 6 is loaded by Composer's Trainer (load_path),
//     which trains on to batch 12; its losses equal those of our own uninterrupted run.
//   Composer -> composer-cpp: Composer trains 6 batches and checkpoints; our Trainer loads that file and trains on to
//     batch 12; our losses equal Composer's own continuation.
// The tolerance is 1e-10 relative: both sides run the same ATen kernels in float64, so they differ only in the order
// of a few floating-point operations inside the optimizers (ours foreach ops, Composer's per-parameter ops).
#include "support/python.h"
#include "support/test_support.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>

namespace composer {
namespace {

namespace fs = std::filesystem;

class LossRecorder : public Callback {
 public:
  void batch_end(State& state, Logger&) override { losses[state.timestamp.batch] = state.loss.item<double>(); }
  std::map<int64_t, double> losses;
};

struct CheckpointInteropTest : ::testing::Test {
  fs::path dir = fs::temp_directory_path() / ("composer_peer_ckpt_" + std::to_string(::getpid()));
  Batch data = testing::make_blobs(16, 8, 4, 5, at::kDouble);
  std::string data_path = (dir / "data.safetensors").string();

  void SetUp() override {
    fs::remove_all(dir);
    fs::create_directories(dir);
    write_safetensors(data_path, {{"x", data.input()}, {"y", data.target()}});
  }
  void TearDown() override { fs::remove_all(dir); }

  // The run of composer_checkpoints.py, here: MLP 8-16-4 float64, DecoupledAdamW(0.01, wd 0.01), batches of 4 in order.
  TrainerOptions options(std::shared_ptr<LossRecorder> recorder) const {
    auto model = testing::make_classifier(8, 16, 4, 0, at::kDouble);
    auto adam = std::make_shared<optim::DecoupledAdamW>(model->parameters(),
                                                        optim::DecoupledAdamWOptions(0.01).weight_decay(0.01));
    return testing::quiet_options(model)
        .train_dataloader(testing::make_loader(data, 4, /*shuffle=*/false))
        .optimizer(adam)
        .callbacks({recorder});
  }

  nlohmann::json run_composer(const std::vector<std::string>& args) {
    const std::string out = (dir / "composer.json").string();
    std::vector<std::string> argv{testing::peer_script("composer_checkpoints.py")};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.push_back(data_path);
    argv.push_back(out);
    const auto py = testing::run_python(argv);
    EXPECT_EQ(py.status, 0) << py.output;
    return nlohmann::json::parse(testing::read_text(out));
  }
};

void expect_same_losses(const std::map<int64_t, double>& ours, const nlohmann::json& composer_losses, int64_t from,
                        int64_t to) {
  for (int64_t b = from; b <= to; ++b) {
    ASSERT_TRUE(ours.count(b)) << "we did not train batch " << b;
    ASSERT_TRUE(composer_losses.contains(std::to_string(b))) << "Composer did not train batch " << b;
    const double theirs = composer_losses.at(std::to_string(b)).get<double>();
    EXPECT_NEAR(ours.at(b), theirs, 1e-10 * std::abs(theirs)) << "batch " << b;
  }
}

TEST_F(CheckpointInteropTest, ComposerContinuesFromOurCheckpoint) {
  COMPOSER_REQUIRE_PYTHON("composer torch");
  auto straight = std::make_shared<LossRecorder>();
  Trainer(options(straight).max_duration("12ba")).fit();
  auto first = std::make_shared<LossRecorder>();
  Trainer half(
      options(first).max_duration("6ba").save_folder((dir / "ours").string()).save_interval(Time::from_string("6ba")));
  half.fit();
  const std::string ckpt = (dir / "ours" / "ep1-ba6-rank0.pt").string();
  ASSERT_TRUE(fs::exists(ckpt));
  const auto result = run_composer({"continue", ckpt});
  EXPECT_EQ(result.at("start_batch").get<int64_t>(), 6);  // Composer resumed at our timestamp
  expect_same_losses(straight->losses, result.at("losses"), 7, 12);
}

TEST_F(CheckpointInteropTest, WeContinueFromComposersCheckpoint) {
  COMPOSER_REQUIRE_PYTHON("composer torch");
  const auto result = run_composer({"save", (dir / "composer").string()});
  const std::string ckpt = (dir / "composer" / "ep1-ba6-rank0.pt").string();
  ASSERT_TRUE(fs::exists(ckpt));
  auto ours = std::make_shared<LossRecorder>();
  Trainer resumed(options(ours).max_duration("12ba").load_path(ckpt));
  EXPECT_EQ(resumed.state().timestamp.batch, 6);
  EXPECT_EQ(resumed.state().timestamp.epoch, 1);
  resumed.fit();
  EXPECT_EQ(resumed.state().timestamp.batch, 12);
  expect_same_losses(ours->losses, result.at("losses"), 7, 12);
}

// A checkpoint in the layout Composer's sharded save writes (torch.distributed.checkpoint of its state dict; see
// composer_checkpoints.py save_sharded) loads into an FSDP run and continues as Composer does.
TEST_F(CheckpointInteropTest, WeContinueFromComposersShardedCheckpointLayout) {
  COMPOSER_REQUIRE_PYTHON("composer torch");
  const std::string ckpt = (dir / "composer_sharded").string();
  const auto result = run_composer({"save_sharded", ckpt});
  ASSERT_TRUE(is_distributed_checkpoint(ckpt));
  auto ours = std::make_shared<LossRecorder>();
  // The float64 model keeps computing in float64 (mixed_precision DEFAULT would compute in float32, as Composer's).
  Trainer resumed(options(ours).max_duration("12ba").load_path(ckpt).parallelism_config(dist::ParallelismConfig().fsdp(
      dist::FSDPOptions().state_dict_type("sharded").mixed_precision(dist::FSDPMixedPrecision::of("FULL")))));
  EXPECT_EQ(resumed.state().timestamp.batch, 6);
  EXPECT_EQ(resumed.state().timestamp.epoch, 1);
  resumed.fit();
  EXPECT_EQ(resumed.state().timestamp.batch, 12);
  expect_same_losses(ours->losses, result.at("losses"), 7, 12);
}

}  // namespace
}  // namespace composer
