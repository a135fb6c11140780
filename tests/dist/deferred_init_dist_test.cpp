// Deferred initialization under FSDP on real processes (composer-cpp launch, Gloo): a Llama built with
// nn::DeferredInit is drawn unit by unit and sharded as it is drawn; it starts bitwise where a one-process build
// starts and trains bitwise as the same model built whole; a model whose weights and gradients (its full fp32
// training state) are about twice each rank's address-space budget (RLIMIT_AS) trains on 4 ranks under it and
// resumes from its sharded checkpoint, with a setup peak of about 1/N of the model plus a unit; a pretrained model
// (a Hugging Face directory, SmolLM2's GGUF file) loads under FSDP with each rank reading only its part of each
// safetensors tensor.
#include "support/data_paths.h"
#include "support/run_files.h"
#include "support/scoped_env.h"
#include "support/worker_run.h"

#include "composer/composer.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <iostream>

#include <unistd.h>

namespace composer {
namespace {

namespace fs = std::filesystem;
using testing::run_worker;

struct DeferredInitDistTest : ::testing::Test {
  fs::path dir = fs::temp_directory_path() / ("composer_deferred_" + std::to_string(::getpid()));
  void SetUp() override { fs::create_directories(dir); }
  void TearDown() override { fs::remove_all(dir); }

  std::pair<std::shared_ptr<models::Llama>, double> pretrained_llama_for_the_worker(testing::ScopedEnv& env) const;
  testing::WorkerResult run(int ranks, const std::string& out, const std::string& mode, const std::string& strategy) {
    const std::vector<std::string> argv{DEFERRED_WORKER, out, mode, strategy};
    return run_worker(ranks == 1 ? argv : testing::launch_argv(COMPOSER_CPP, ranks, argv), 600);
  }
  // The 4 batches run without interruption on 4 FULL_SHARD ranks end at `resumed`'s last loss, bitwise.
  void expect_loss_of_a_straight_run(testing::ScopedEnv& env, const testing::WorkerResult& resumed) {
    env.set("DEFERRED_WORKER_LOAD", "");
    env.set("DEFERRED_WORKER_STEPS", "4");
    const auto straight = run(4, "-", "deferred", "FULL_SHARD");
    ASSERT_EQ(straight.status, 0) << straight.output;
    const auto loss = testing::printed_values(resumed.output, "loss ", "[rank 0] ");
    ASSERT_EQ(loss.size(), 1u) << resumed.output;
    EXPECT_EQ(loss, testing::printed_values(straight.output, "loss ", "[rank 0] "));
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

// glibc's allocator pinned (one arena, a fixed mmap threshold), so that a rank's address space follows what it
// allocates rather than glibc's reserves, and the model's depth and widths.
void pinned_allocator_and_model(testing::ScopedEnv& env, const char* layers, const char* hidden,
                                const char* intermediate) {
  env.set("MALLOC_ARENA_MAX", "1");
  env.set("MALLOC_MMAP_THRESHOLD_", "1048576");
  env.set("DEFERRED_WORKER_LAYERS", layers);
  env.set("DEFERRED_WORKER_HIDDEN", hidden);
  env.set("DEFERRED_WORKER_INTERMEDIATE", intermediate);
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
    expect_bitwise_equal(dir / ("normal" + tag + ".pt"), dir / ("deferred" + tag + ".pt"),
                         "trained, " + tag + " ranks");
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
  pinned_allocator_and_model(env, "32", "384", "1024");
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
  expect_loss_of_a_straight_run(env, resumed);

  // The limit is real: the same model built whole fails under it.
  env.set("DEFERRED_WORKER_STEPS", "");
  const auto whole = run(4, "-", "normal", "FULL_SHARD");
  EXPECT_NE(whole.status, 0) << whole.output;
  EXPECT_NE(whole.output.find("can't allocate memory"), std::string::npos) << whole.output;
}

// The initial weights a run wrote (OUT.init: the ComposerLanguageModel's names) against `llama`'s, bitwise.
void expect_weights_of(const models::Llama& llama, const fs::path& init, const std::string& what) {
  const auto written = testing::read_pickled_tensors(init);
  ASSERT_EQ(written.size(), llama.parameters().size()) << what;
  for (const auto& p : llama.named_parameters()) {
    ASSERT_TRUE(written.count("model." + p.key())) << p.key() << " (" << what << ")";
    EXPECT_TRUE(at::equal(written.at("model." + p.key()), p.value())) << p.key() << " (" << what << ")";
  }
}

// A random Llama (4 layers of hidden 256, MLP 640, a 4096-token vocabulary: 4.3M parameters) saved as a Hugging
// Face directory dir/hf, which the worker then loads; the model and the file's size in MiB.
std::pair<std::shared_ptr<models::Llama>, double> DeferredInitDistTest::pretrained_llama_for_the_worker(
    testing::ScopedEnv& env) const {
  const auto config = models::LlamaConfig()
                          .vocab_size(4096)
                          .hidden_size(256)
                          .intermediate_size(640)
                          .num_hidden_layers(4)
                          .num_attention_heads(4)
                          .num_key_value_heads(2)
                          .max_position_embeddings(64)
                          .tie_word_embeddings(true);
  torch::manual_seed(21);
  auto llama = std::make_shared<models::Llama>(config);
  models::save_llama_hf(*llama, (dir / "hf").string(), models::SavePretrainedOptions());
  env.set("DEFERRED_WORKER_PRETRAINED", (dir / "hf").string());
  env.set("DEFERRED_WORKER_VOCAB", "4096");
  return {llama, static_cast<double>(fs::file_size(dir / "hf" / "model.safetensors")) / 1048576.0};
}

// That Llama (16.6 MiB) loaded under nn::DeferredInit on 2 FULL_SHARD ranks: the shards hold the file's weights
// bitwise, and each rank reads about half the file (its part of each tensor) where a whole load reads all of it.
TEST_F(DeferredInitDistTest, PretrainedSafetensorsAreReadByPartsUnderFullShard) {
  testing::ScopedEnv env;
  const auto [llama, file_mib] = pretrained_llama_for_the_worker(env);
  const auto deferred = run(2, (dir / "d.pt").string(), "deferred", "FULL_SHARD");
  ASSERT_EQ(deferred.status, 0) << deferred.output;
  expect_weights_of(*llama, dir / "d.pt.init", "deferred");
  const auto whole = run(2, (dir / "w.pt").string(), "normal", "FULL_SHARD");
  ASSERT_EQ(whole.status, 0) << whole.output;
  expect_bitwise_equal(dir / "w.pt", dir / "d.pt", "trained from the file");
  for (const int rank : {0, 1}) {
    const std::string tag = "[rank " + std::to_string(rank) + "] ";
    const auto part = testing::printed_values(deferred.output, "setup_read_mib ", tag);
    const auto all = testing::printed_values(whole.output, "setup_read_mib ", tag);
    ASSERT_EQ(part.size(), 1u) << deferred.output;
    ASSERT_EQ(all.size(), 1u) << whole.output;
    EXPECT_GE(all[0], file_mib) << tag;
    EXPECT_LT(part[0], 0.55 * file_mib) << tag << " read " << part[0] << " MiB of " << file_mib;
  }
}

// The same file under tensor parallelism (TP 2 on 2 ranks, and 2 x 2: TP 2 within FULL_SHARD over 2 on 4 ranks):
// each rank reads of each split tensor only its part (of the second dimension's split, row by row), and of that
// only its FSDP shard, where a whole tensor was read at its unit and cut: a rank reads under 55% (TP 2) and 30%
// (2 x 2) of the file, and the weights right after setup, gathered whole, are the file's bitwise.
TEST_F(DeferredInitDistTest, PretrainedSafetensorsAreReadByPartsUnderTp) {
  testing::ScopedEnv env;
  const auto [llama, file_mib] = pretrained_llama_for_the_worker(env);
  env.set("DEFERRED_WORKER_STEPS", "1");
  for (const auto& [ranks, bound] : std::vector<std::pair<int, double>>{{2, 0.55}, {4, 0.3}}) {
    const std::string out = (dir / ("tp" + std::to_string(ranks) + ".pt")).string();
    const auto r = run(ranks, out, "deferred", "TP2");
    ASSERT_EQ(r.status, 0) << r.output;
    expect_weights_of(*llama, out + ".init", "TP 2 on " + std::to_string(ranks) + " ranks");
    for (int rank = 0; rank < ranks; ++rank) {
      const std::string tag = "[rank " + std::to_string(rank) + "] ";
      const auto read = testing::printed_values(r.output, "setup_read_mib ", tag);
      ASSERT_EQ(read.size(), 1u) << r.output;
      std::cout << tag << ranks << " ranks: setup_read_mib " << read[0] << " of " << file_mib << "\n";
      EXPECT_LT(read[0], bound * file_mib) << tag << ranks << " ranks read " << read[0] << " MiB of " << file_mib;
    }
  }
}

// A full checkpoint (state_dict_type full: one torch.save file) of a 16.6 MiB Llama resumed on 4 FULL_SHARD ranks:
// each rank reads of each sharded tensor only its part's bytes, and verifies the CRC-32s of a quarter of the records,
// so it reads about half the file (a whole load verified and read all of it: twice the file), and the run goes on
// bitwise as the run that was not interrupted.
TEST_F(DeferredInitDistTest, FullCheckpointsAreReadByPartsUnderFullShard) {
  testing::ScopedEnv env;
  pinned_allocator_and_model(env, "4", "256", "640");
  env.set("DEFERRED_WORKER_VOCAB", "4096");
  env.set("DEFERRED_WORKER_STATE_DICT", "full");
  env.set("DEFERRED_WORKER_SAVE", (dir / "ckpt").string());
  const auto saved = run(4, "-", "deferred", "FULL_SHARD");
  ASSERT_EQ(saved.status, 0) << saved.output;
  const fs::path file = dir / "ckpt" / "ep0-ba2-rank0.pt";
  ASSERT_TRUE(fs::is_regular_file(file)) << saved.output;
  const double file_mib = static_cast<double>(fs::file_size(file)) / 1048576.0;
  env.set("DEFERRED_WORKER_SAVE", "");
  env.set("DEFERRED_WORKER_LOAD", file.string());
  const auto resumed = run(4, "-", "deferred", "FULL_SHARD");
  ASSERT_EQ(resumed.status, 0) << resumed.output;
  EXPECT_EQ(testing::printed_values(resumed.output, "start_batch ", "[rank 0] "), std::vector<double>{2});
  for (int rank = 0; rank < 4; ++rank) {
    const std::string tag = "[rank " + std::to_string(rank) + "] ";
    const auto read = testing::printed_values(resumed.output, "setup_read_mib ", tag);
    ASSERT_EQ(read.size(), 1u) << resumed.output;
    std::cout << tag << "setup_read_mib " << read[0] << " of a " << file_mib << " MiB file\n";
    EXPECT_LT(read[0], 0.6 * file_mib) << tag << " read " << read[0] << " MiB of " << file_mib;
  }
  expect_loss_of_a_straight_run(env, resumed);
}

// SmolLM2-135M-Instruct's GGUF file (Q4_1) under nn::DeferredInit on 2 FULL_SHARD ranks: each rank dequantizes
// only its part of each tensor, a unit at a time, and the shards hold bitwise what a whole load holds.
TEST_F(DeferredInitDistTest, SmolLM2GgufLoadsUnitByUnitUnderFullShard) {
  const std::string gguf = testing::data_path("smollm2/SmolLM2-135M-Instruct.Q4_1.gguf");
  COMPOSER_REQUIRE_DATA(gguf);
  testing::ScopedEnv env;
  env.set("MALLOC_ARENA_MAX", "1");  // the address space follows what is allocated (as above)
  env.set("MALLOC_MMAP_THRESHOLD_", "1048576");
  env.set("DEFERRED_WORKER_PRETRAINED", gguf);
  env.set("DEFERRED_WORKER_VOCAB", "49152");
  env.set("DEFERRED_WORKER_STEPS", "1");
  const auto deferred = run(2, (dir / "d.pt").string(), "deferred", "FULL_SHARD");
  ASSERT_EQ(deferred.status, 0) << deferred.output;
  expect_weights_of(*models::load_llama_gguf(gguf), dir / "d.pt.init", "SmolLM2 deferred");
  for (const int rank : {0, 1}) {
    const auto setup =
        testing::printed_values(deferred.output, "setup_vm_mib ", "[rank " + std::to_string(rank) + "] ");
    ASSERT_EQ(setup.size(), 1u) << deferred.output;
    std::cout << "[rank " << rank << "] setup_vm_mib " << setup[0] << "\n";
    // 513 MiB of fp32 weights: a rank maps its half (256 MiB), the file (94 MiB) and the Trainer's setup; each
    // tensor's part is dequantized from the blocks that hold it, and the random draws the file overwrites are not
    // made: measured 409-411 MiB (464-492 MiB when each tensor was dequantized whole and the draws replayed into a
    // scratch), where a whole load maps 930 MiB.
    EXPECT_LT(setup[0], 450) << deferred.output;
  }
  // With LoRA adapters (r 8 on q_proj and v_proj) the frozen base is sharded as well: the same setup, and each rank
  // holds half of the base and of the adapters.
  env.set("DEFERRED_WORKER_LORA", "8");
  const auto lora = run(2, "-", "deferred", "FULL_SHARD");
  ASSERT_EQ(lora.status, 0) << lora.output;
  for (const int rank : {0, 1}) {
    const std::string tag = "[rank " + std::to_string(rank) + "] ";
    const auto setup = testing::printed_values(lora.output, "setup_vm_mib ", tag);
    const auto shard = testing::printed_values(lora.output, "shard_mib ", tag);
    const auto model = testing::printed_values(lora.output, "model_mib ", tag);
    ASSERT_EQ(setup.size(), 1u) << lora.output;
    ASSERT_EQ(shard.size(), 1u) << lora.output;
    ASSERT_EQ(model.size(), 1u) << lora.output;
    std::cout << tag << "LoRA setup_vm_mib " << setup[0] << ", shard_mib " << shard[0] << " of " << model[0] << "\n";
    EXPECT_LT(setup[0], 450) << lora.output;
    EXPECT_NEAR(shard[0], model[0] / 2, 0.01) << lora.output;
  }
}

// device_train_microbatch_size: auto under FSDP (issue 44 item 4): 2 FULL_SHARD ranks, only rank 1 under a memory
// limit; the ranks agree on every retry (each all-gather of an attempt is preceded by the attempt's check), neither
// waits forever, and the run ends bitwise where a run with the size found, given from the start, ends.
TEST_F(DeferredInitDistTest, AutomaticMicrobatchingUnderFullShardAgreesAndEqualsTheFoundSize) {
  testing::ScopedEnv env;
  pinned_allocator_and_model(env, "4", "128", "352");
  env.set("DEFERRED_WORKER_SEQ", "256");
  env.set("DEFERRED_WORKER_BATCH", "32");
  env.set("DEFERRED_WORKER_BUDGET_RANK", "1");
  // Measured, a rank's address space over the run: 202 MiB with the whole batch (16 a rank), 128 with microbatches
  // of 8, 103 with 4, 60 with 2. Under 165 MiB the first batch shrinks once (16 -> 8), under 80 three times in a row
  // (16 -> 8 -> 4 -> 2), each size at least 20 MiB from its limit.
  for (const std::string budget : {"165", "80"}) {
    env.set("DEFERRED_WORKER_MICROBATCH", "auto");
    env.set("DEFERRED_WORKER_BUDGET_MIB", budget);
    const auto automatic = run(2, (dir / ("auto" + budget + ".pt")).string(), "deferred", "FULL_SHARD");
    ASSERT_EQ(automatic.status, 0) << automatic.output;
    const auto rank0 = testing::printed_values(automatic.output, "microbatch ", "[rank 0] ");
    const auto rank1 = testing::printed_values(automatic.output, "microbatch ", "[rank 1] ");
    ASSERT_EQ(rank0.size(), 1u) << automatic.output;
    EXPECT_EQ(rank0, rank1) << "the ranks must agree on the size";
    EXPECT_LT(rank0[0], 16) << "the whole batch (16 a rank) fits under the limit: no retry tested\n"
                            << automatic.output;
    EXPECT_NE(automatic.output.find("out of memory at device_train_microbatch_size"), std::string::npos)
        << automatic.output;

    env.set("DEFERRED_WORKER_BUDGET_MIB", "");
    env.set("DEFERRED_WORKER_MICROBATCH", std::to_string(static_cast<int64_t>(rank0[0])));
    const auto fixed = run(2, (dir / ("fixed" + budget + ".pt")).string(), "deferred", "FULL_SHARD");
    ASSERT_EQ(fixed.status, 0) << fixed.output;
    expect_bitwise_equal(dir / ("fixed" + budget + ".pt"), dir / ("auto" + budget + ".pt"),
                         "auto under " + budget + " MiB against the size found");
  }
}

}  // namespace
}  // namespace composer
