// LoRA over two real ranks, started by composer-cpp launch from YAML: under DDP and under FSDP (FULL_SHARD) the
// adapters train to the same values and the frozen base stays as it started (FSDP shards the frozen base like the
// adapters: tests/dist/fsdp_test.cpp's FrozenParametersAreShardedAndEqualOneProcess).
#include "support/process.h"
#include "support/worker_run.h"

#include "composer/composer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <thread>

namespace composer {
namespace {

namespace fs = std::filesystem;

struct LoraDistTest : ::testing::Test {
  fs::path dir = fs::temp_directory_path() / ("composer_lora_dist_" + std::to_string(::getpid()));
  void SetUp() override { fs::create_directories(dir); }
  void TearDown() override { fs::remove_all(dir); }

  static c10::Dict<c10::IValue, c10::IValue> model_of(const fs::path& checkpoint) {
    return read_checkpoint(checkpoint.string()).toGenericDict().at("state").toGenericDict().at("model").toGenericDict();
  }
  // Trains the config on two ranks with `parallelism` and returns rank 0's final checkpoint's model tensors.
  c10::Dict<c10::IValue, c10::IValue> run(const std::string& name, const std::string& parallelism) {
    const std::string cfg = (dir / (name + ".yaml")).string();
    std::ofstream(cfg) << "model: {name: llama, hidden_size: 32, intermediate_size: 48, num_hidden_layers: 2,\n"
                          "        num_attention_heads: 4, num_key_value_heads: 2,\n"
                          "        lora: {r: 4, lora_alpha: 8, target_modules: [q_proj, v_proj, down_proj]}}\n"
                          "train_data: {dataset: synthetic_tokens, vocab_size: 64, num_samples: 64, seq_len: 16,\n"
                          "             batch_size: 4}\n"
                          "optimizer: {name: decoupled_adamw, lr: 0.01}\n"
                          "max_duration: 4ba\nseed: 3\nprogress_bar: false\nloggers: []\n"
                          "save_folder: "
                       << (dir / name).string() << "\nsave_interval: 1ba\n"
                       << parallelism;
    const auto r = testing::run_worker(testing::launch_argv(COMPOSER_CPP, 2, {"train", cfg}));
    EXPECT_EQ(r.status, 0) << r.output;
    return model_of(dir / name / "latest-rank0.pt");
  }
};

TEST_F(LoraDistTest, AdaptersTrainAlikeUnderDdpAndFsdpAndTheBaseStaysFrozen) {
  const auto ddp = run("ddp", "");
  const auto fsdp = run("fsdp", "parallelism_config: {fsdp: {sharding_strategy: FULL_SHARD, state_dict_type: full}}\n");
  // The same start (seed 3) and data: the frozen base is the same, the adapters trained the same way.
  models::Llama fresh(models::LlamaConfig()
                          .vocab_size(64)
                          .hidden_size(32)
                          .intermediate_size(48)
                          .num_hidden_layers(2)
                          .num_attention_heads(4)
                          .num_key_value_heads(2));
  int64_t adapters = 0;
  for (const auto& e : ddp) {
    const std::string key = e.key().toStringRef();
    ASSERT_TRUE(fsdp.contains(key)) << key;
    const at::Tensor a = e.value().toTensor(), b = fsdp.at(key).toTensor();
    EXPECT_LT((a - b).abs().max().item<double>(), 1e-5) << key;
    if (key.find("lora_B") != std::string::npos) {
      ++adapters;
      EXPECT_GT(a.abs().max().item<double>(), 0.0) << key << " did not train";
    }
  }
  EXPECT_EQ(adapters, 6);
  // Between the first and the last batch only the adapters moved.
  const auto first = model_of(dir / "fsdp" / "ep0-ba1-rank0.pt");
  for (const auto& e : fsdp) {
    const std::string key = e.key().toStringRef();
    const bool adapter = key.find("lora_") != std::string::npos;
    EXPECT_EQ(at::equal(e.value().toTensor(), first.at(key).toTensor()), !adapter) << key;
  }
  EXPECT_EQ(ddp.size(), fresh.named_parameters().size() + 12);  // the base and 12 adapter matrices
}

// Autoresume keeps the adapters: a LoRA run SIGKILLed a few batches in and started again ends with bitwise the
// adapters (and the frozen base) of the same run left alone; the restart resumed (its first checkpoints untouched).
TEST_F(LoraDistTest, SigkilledLoraRunAutoresumesToTheSameAdapters) {
  const auto config = [&](const std::string& name) {
    const std::string cfg = (dir / (name + ".yaml")).string();
    std::ofstream(cfg) << "model: {name: llama, hidden_size: 32, intermediate_size: 48, num_hidden_layers: 2,\n"
                          "        num_attention_heads: 4, num_key_value_heads: 2, lora: {r: 4, lora_alpha: 8}}\n"
                          "train_data: {dataset: synthetic_tokens, vocab_size: 64, num_samples: 160, seq_len: 16,\n"
                          "             batch_size: 4}\n"
                          "optimizer: {name: decoupled_adamw, lr: 0.01}\n"
                          "max_duration: 40ba\nseed: 5\nprogress_bar: false\nloggers: []\nrun_name: lora-resume\n"
                          "autoresume: true\nsave_interval: 1ba\nsave_folder: "
                       << (dir / name).string() << "\n";
    return cfg;
  };
  const std::string ref_cfg = config("ref"), run_cfg = config("run");
  ASSERT_EQ(testing::run_worker({COMPOSER_CPP, "train", ref_cfg}).status, 0);
  {
    testing::ChildProcess p({COMPOSER_CPP, "train", run_cfg});
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (std::chrono::steady_clock::now() < deadline && !fs::exists(dir / "run" / "ep0-ba3-rank0.pt"))
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    p.kill_now();
    EXPECT_EQ(p.wait(), 128 + SIGKILL);
  }
  ASSERT_TRUE(fs::exists(dir / "run" / "ep0-ba3-rank0.pt"));
  ASSERT_FALSE(fs::exists(dir / "run" / "ep0-ba40-rank0.pt")) << "the run ended before it was killed";
  const auto first_written = fs::last_write_time(dir / "run" / "ep0-ba1-rank0.pt");
  const auto r = testing::run_worker({COMPOSER_CPP, "train", run_cfg});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(fs::last_write_time(dir / "run" / "ep0-ba1-rank0.pt"), first_written);  // resumed, not started over

  const auto ref = model_of(dir / "ref" / "latest-rank0.pt"), run = model_of(dir / "run" / "latest-rank0.pt");
  ASSERT_EQ(ref.size(), run.size());
  int64_t adapters = 0;
  for (const auto& e : ref) {
    const std::string key = e.key().toStringRef();
    ASSERT_TRUE(run.contains(key)) << key;
    EXPECT_TRUE(at::equal(e.value().toTensor(), run.at(key).toTensor())) << key;
    adapters += key.find("lora_B") != std::string::npos;
  }
  EXPECT_EQ(adapters, 4);  // q_proj and v_proj (PEFT's default targets for Llama) in each of two layers
}

}  // namespace
}  // namespace composer
