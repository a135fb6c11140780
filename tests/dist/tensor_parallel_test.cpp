// Tensor parallelism with real processes over Gloo (composer-cpp launch): float64 Llama-family and GPT-2 runs with
// tensor_parallel_degree 2 and 4, and FSDP 2 x TP 2, reach the weights of one process with the global batch (within
// 1e-10) with DecoupledAdamW, norm clipping and microbatching, the vocabulary split too (tied heads); EMA's averaged
// weights and OptimizerMonitor's norms agree too; full and sharded (DCP) checkpoints of TP 2 and 2 x 2 runs resume on
// other layouts, and PyTorch reads the sharded ones; bad plans and degrees are clear errors. In process: a split and
// its inverse, the model zoo's plans, a plan's errors.
#include "support/checkpoint_leaves.h"
#include "support/process.h"
#include "support/python.h"
#include "support/run_files.h"
#include "support/scoped_env.h"
#include "support/worker_run.h"

#include "composer/composer.h"

#include <gtest/gtest.h>
#include <torch/script.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <tuple>

#include <unistd.h>

namespace composer {
namespace {

namespace fs = std::filesystem;
using testing::run_worker;

// The "generated ..." line a TP_WORKER_GENERATE run prints ("(none)" without one).
std::string generated(const std::string& output) {
  const auto at = output.find("generated ");
  return at == std::string::npos ? std::string("(none)") : output.substr(at, output.find('\n', at) - at);
}

// Sequence parallelism with norm clipping and microbatches of 2, and 5 tokens generated after training.
void sequence_parallel_with_generation(testing::ScopedEnv& env) {
  env.set("TP_WORKER_CLIP", "norm:0.5");
  env.set("TP_WORKER_MICROBATCH", "2");
  env.set("TP_WORKER_SEQUENCE_PARALLEL", "1");
  env.set("TP_WORKER_GENERATE", "5");
}

struct TensorParallelTest : ::testing::Test {
  const fs::path dir = testing::fresh_dir("tp");
  void TearDown() override { fs::remove_all(dir); }
  static std::vector<std::string> launch(int n, const std::vector<std::string>& command) {
    return testing::launch_argv(COMPOSER_CPP, n, command);
  }

  // Runs `model` in `layout` on `ranks` processes (1: no launcher) and returns its output; the weights go to
  // dir/<name>.pt.
  std::string run(const std::string& name, const std::string& model, const std::string& layout, int ranks) {
    const std::string out = (dir / (name + ".pt")).string();
    const std::vector<std::string> argv{TP_WORKER, out, model, layout};
    const auto r = run_worker(ranks == 1 ? argv : launch(ranks, argv), 300);
    EXPECT_EQ(r.status, 0) << name << ":\n" << r.output;
    return r.output;
  }

  // Runs as run() does and expects the weights of the run called `reference`.
  std::string expect_run_equals(const std::string& reference, const std::string& name, const std::string& model,
                                const std::string& layout, int ranks) {
    const std::string output = run(name, model, layout, ranks);
    expect_same_weights(reference, name);
    return output;
  }

  // With TP_WORKER_SEQ=11 and sequence parallelism: 11 tokens do not split in 2, and every rank stops with the error.
  void expect_odd_sequence_error(const std::string& model) {
    const auto r = run_worker(launch(2, {TP_WORKER, (dir / "odd.pt").string(), model, "tp2"}), 120);
    EXPECT_NE(r.status, 0) << r.output;
    EXPECT_NE(r.output.find("sequence_parallel: the sequence length 11 does not split in tensor_parallel_degree 2"),
              std::string::npos)
        << r.output;
  }

  void expect_same_weights(const std::string& a_name, const std::string& b_name, const std::string& suffix = "") {
    const auto a = testing::read_pickled_tensors(dir / (a_name + ".pt" + suffix));
    const auto b = testing::read_pickled_tensors(dir / (b_name + ".pt" + suffix));
    ASSERT_FALSE(a.empty());
    ASSERT_EQ(a.size(), b.size()) << a_name << " vs " << b_name;
    for (const auto& [name, t] : a) {
      ASSERT_TRUE(b.count(name)) << name;
      ASSERT_EQ(t.sizes(), b.at(name).sizes()) << name;
      EXPECT_LT((t - b.at(name)).abs().max().item<double>(), 1e-10) << name << ": " << a_name << " vs " << b_name;
    }
  }
};

TEST_F(TensorParallelTest, LlamaTp2Tp4AndFsdp2xTp2EqualOneProcessWithClippingAndMicrobatches) {
  testing::ScopedEnv env;
  env.set("TP_WORKER_CLIP", "norm:0.5");
  env.set("TP_WORKER_MICROBATCH", "2");
  run("one", "llama", "one", 1);
  const std::string tp2 = run("tp2", "llama", "tp2", 2);
  EXPECT_EQ(testing::printed_words(tp2, "tp "), (std::vector<std::string>{"2", "2"})) << tp2;
  EXPECT_EQ(testing::printed_words(tp2, "dp "), (std::vector<std::string>{"0 1", "0 1"})) << tp2;
  EXPECT_EQ(testing::printed_words(tp2, "samples "), std::vector<std::string>{"32"}) << tp2;  // not counted twice
  expect_same_weights("one", "tp2");
  const std::string tp4 = run("tp4", "llama", "tp4", 4);
  EXPECT_EQ(testing::printed_words(tp4, "tp ").size(), 4u) << tp4;
  expect_same_weights("one", "tp4");
  const std::string mesh = run("2x2", "llama", "2x2", 4);
  std::vector<std::string> places = testing::printed_words(mesh, "dp ");
  std::sort(places.begin(), places.end());
  EXPECT_EQ(places, (std::vector<std::string>{"0 2", "0 2", "1 2", "1 2"})) << mesh;
  expect_same_weights("one", "2x2");
  // Each rank of 2 x 2 keeps about a quarter of the parameters that the plan splits, half of the others.
  const auto shard = testing::printed_values(mesh, "shard_bytes ", "[rank 1] ");
  const auto alone = testing::printed_values(tp2, "shard_bytes ", "[rank 1] ");
  ASSERT_EQ(shard.size(), 1u);
  ASSERT_EQ(alone.size(), 1u);
  EXPECT_LT(shard[0], 0.55 * alone[0]);
}

TEST_F(TensorParallelTest, Gpt2FusedAttentionTp2And2x2AndBertTp2EqualOneProcess) {
  testing::ScopedEnv env;
  env.set("TP_WORKER_CLIP", "norm:0.5");
  run("gpt-one", "gpt2", "one", 1);
  expect_run_equals("gpt-one", "gpt-tp2", "gpt2", "tp2", 2);
  expect_run_equals("gpt-one", "gpt-2x2", "gpt2", "2x2", 4);
  run("bert-one", "bert", "one", 1);  // BERT's post-LN layers: the same attention and its ffn
  expect_run_equals("bert-one", "bert-tp2", "bert", "tp2", 2);
}

// The vocabulary split (the Llama plan's embed_tokens rowwise; a user plan adding GPT-2's wte): the tied heads
// multiply by each rank's rows and gather the logits; the runs equal one process, and each rank keeps its rows only.
TEST_F(TensorParallelTest, VocabularyParallelTiedHeadsEqualOneProcessAndKeepTheirRows) {
  testing::ScopedEnv env;
  env.set("TP_WORKER_CLIP", "norm:0.5");
  env.set("TP_WORKER_TIED", "1");
  run("tied-one", "llama", "one", 1);
  const std::string tp2 = expect_run_equals("tied-one", "tied-tp2", "llama", "tp2", 2);
  expect_run_equals("tied-one", "tied-2x2", "llama", "2x2", 4);
  // The tied decoder (vocabulary 96, width 64, 2 layers of 30720 split and 128 whole weights, the final norm's 64):
  // half of the embedding and of the split layers per rank, in float64.
  const double kept = (96 * 64 + 2 * 30720) / 2 + 2 * 128 + 64;
  EXPECT_EQ(testing::printed_values(tp2, "shard_bytes ", "[rank 1] "), std::vector<double>{8 * kept}) << tp2;
  env.set("TP_WORKER_PLAN", "vocab");
  run("gpt-vocab-one", "gpt2", "one", 1);
  expect_run_equals("gpt-vocab-one", "gpt-vocab-tp2", "gpt2", "tp2", 2);
}

// Loss parallelism: in training the vocabulary heads leave their logits split, and the loss and the train metric come
// from each rank's slice (never gathered); the runs still equal one process, and so does the metric.
TEST_F(TensorParallelTest, LossParallelEqualsOneProcessAndSoDoesItsMetric) {
  testing::ScopedEnv env;
  env.set("TP_WORKER_MICROBATCH", "2");
  env.set("TP_WORKER_LOSS_PARALLEL", "1");  // no effect on one process
  const std::string one = run("lp-one", "llama", "one", 1);
  const std::string tp2 = expect_run_equals("lp-one", "lp-tp2", "llama", "tp2", 2);  // the untied lm_head
  const auto expected = testing::printed_pairs(one, "metric "), got = testing::printed_pairs(tp2, "metric ");
  ASSERT_FALSE(expected.empty()) << one;
  ASSERT_EQ(got.size(), expected.size()) << tp2;
  for (const auto& [key, value] : expected)  // one process's metric sums in float32
    EXPECT_NEAR(got.at(key), value, 1e-5 * std::abs(value)) << key;
  env.set("TP_WORKER_TIED", "1");
  run("lp-tied-one", "llama", "one", 1);
  expect_run_equals("lp-tied-one", "lp-tied-2x2", "llama", "2x2", 4);
}

// Sequence parallelism: the norms and the residual stream on each rank's slice of the 12-token sequences (6 or 3
// tokens), the attention and MLP inputs gathered, their outputs reduce-scattered; the runs equal one process, with the
// logits gathered or, tied and loss-parallel, left split. Greedy generation from the trained split model (any
// context length: without gradients nothing is split along the sequence, and the logits come whole; the key-value
// cache through FSDP's units) gives one process's tokens.
TEST_F(TensorParallelTest, SequenceParallelEqualsOneProcessAndGeneratesItsTokens) {
  testing::ScopedEnv env;
  sequence_parallel_with_generation(env);
  const std::string one = run("sp-one", "llama", "one", 1);
  EXPECT_NE(generated(one), "(none)") << one;
  const std::string tp2 = expect_run_equals("sp-one", "sp-tp2", "llama", "tp2", 2);
  EXPECT_EQ(generated(tp2), generated(one));
  // The key-value cache through FSDP's units, on every rank.
  EXPECT_EQ(testing::printed_values(tp2, "generation_cached ", "[rank 1] "), std::vector<double>{1}) << tp2;
  EXPECT_EQ(generated(expect_run_equals("sp-one", "sp-tp4", "llama", "tp4", 4)), generated(one));
  env.set("TP_WORKER_TIED", "1");
  env.set("TP_WORKER_LOSS_PARALLEL", "1");
  const std::string tied = run("sp-tied-one", "llama", "one", 1);
  EXPECT_EQ(generated(expect_run_equals("sp-tied-one", "sp-tied-2x2", "llama", "2x2", 4)), generated(tied));
  env.set("TP_WORKER_GENERATE", "");
  env.set("TP_WORKER_SEQ", "11");  // 11 tokens do not split in 2: every rank stops with the error
  expect_odd_sequence_error("llama");
}

// GPT-2's token embedding stays whole (its head is tied to it), so its sequence-parallel region starts at the
// embedding dropout (cut to each rank's slice) and ends at ln_f (gathered: ln_f and the head run whole); the blocks'
// norms run on the slice. TP 2 and 2 x 2 equal one process and generate its tokens; so does TP 2 with the user plan
// that also splits wte by rows (its lookup all-reduced, outside the region); 11 tokens do not split in 2.
TEST_F(TensorParallelTest, Gpt2SequenceParallelEqualsOneProcessAndGeneratesItsTokens) {
  testing::ScopedEnv env;
  sequence_parallel_with_generation(env);
  const std::string one = run("gsp-one", "gpt2", "one", 1);
  EXPECT_NE(generated(one), "(none)") << one;
  EXPECT_EQ(generated(expect_run_equals("gsp-one", "gsp-tp2", "gpt2", "tp2", 2)), generated(one));
  EXPECT_EQ(generated(expect_run_equals("gsp-one", "gsp-2x2", "gpt2", "2x2", 4)), generated(one));
  env.set("TP_WORKER_GENERATE", "");
  env.set("TP_WORKER_PLAN", "vocab");
  expect_run_equals("gsp-one", "gsp-vocab-tp2", "gpt2", "tp2", 2);
  env.set("TP_WORKER_SEQ", "11");
  expect_odd_sequence_error("gpt2");
}

// The exports of a split model (ExportForInferenceCallback at FIT_END): the weights gathered whole, rank 0 writes what
// one process writes. Safetensors (TP 2, 2 x 2): the same names and values. TorchScript (TP 2, 2 x 2, FSDP 2): the
// split layers run as whole ones while their weights are whole and FSDP's units stay gathered through the trace, so it
// holds no collective and gives one process's logits.
TEST_F(TensorParallelTest, ExportsOfSplitModelsEqualOneProcess) {
  testing::ScopedEnv env;
  env.set("TP_WORKER_EXPORT", "safetensors");
  run("ex-one", "llama", "one", 1);
  for (const auto& [name, layout, ranks] : {std::tuple{"ex-tp2", "tp2", 2}, std::tuple{"ex-2x2", "2x2", 4}}) {
    run(name, "llama", layout, ranks);
    const auto whole = read_safetensors((dir / "ex-one.pt.export").string());
    const auto split = read_safetensors((dir / (std::string(name) + ".pt.export")).string());
    ASSERT_EQ(whole.size(), split.size()) << name;
    for (size_t i = 0; i < whole.size(); ++i) {
      EXPECT_EQ(whole[i].first, split[i].first) << name;
      ASSERT_EQ(whole[i].second.sizes(), split[i].second.sizes()) << name << " " << whole[i].first;
      EXPECT_LT((whole[i].second - split[i].second).abs().max().item<double>(), 1e-10) << name << " " << whole[i].first;
    }
  }
  env.set("TP_WORKER_EXPORT", "torchscript");
  run("ts-one", "llama", "one", 1);
  const at::Tensor ids = at::arange(8 * 12, at::kLong).remainder(96).view({8, 12});
  const auto logits = [&](const std::string& name, int64_t rows) {  // the traced batch's shape: 8 / data-parallel
    torch::jit::Module m = torch::jit::load((dir / (name + ".pt.export")).string());
    return m.forward({ids.narrow(0, 0, rows)}).toTensor();
  };
  const at::Tensor whole = logits("ts-one", 8);
  for (const auto& [name, layout, ranks, rows] :
       {std::tuple{"ts-tp2", "tp2", 2, 8}, std::tuple{"ts-2x2", "2x2", 4, 4}, std::tuple{"ts-fsdp2", "fsdp2", 2, 4}}) {
    run(name, "llama", layout, ranks);
    const at::Tensor split = logits(name, rows);
    ASSERT_EQ(whole.narrow(0, 0, rows).sizes(), split.sizes()) << name;
    EXPECT_LT((whole.narrow(0, 0, rows) - split).abs().max().item<double>(), 1e-10) << name;
  }
}

// Automatic microbatching under TP 2 with a real memory limit on rank 1 only (40 MiB more than it maps at the first
// batch): the batch of 256 sequences does not fit there, both ranks shrink together (the tensor-parallel collectives
// are preceded by the search's check, and by an allocation of what they allocate inside), neither waits in a
// collective the other will not reach, and the run reaches one process's weights with the batch whole (1e-10).
// Before, rank 1 ran out inside an all-reduce and rank 0 waited there until the timeout.
TEST_F(TensorParallelTest, AutoMicrobatchingUnderTpShrinksEveryRankAndEqualsOneProcess) {
  testing::ScopedEnv env;
  // One malloc arena: RLIMIT_AS counts the 64 MiB a new arena reserves, which a machine short of memory would not
  // refuse; the test is about the allocations themselves.
  env.set("MALLOC_ARENA_MAX", "1");
  env.set("TP_WORKER_BATCH", "256");
  env.set("TP_WORKER_STEPS", "2");
  env.set("TP_WORKER_MICROBATCH", "auto");
  env.set("TP_WORKER_LIMIT", "40:1");
  run("amb-one", "llama", "one", 1);
  const std::string out = expect_run_equals("amb-one", "amb-tp2", "llama", "tp2", 2);
  EXPECT_NE(out.find("[rank 1] limited to 40 MiB more"), std::string::npos) << out;
  const auto rank0 = testing::printed_values(out, "train_microbatch ", "[rank 0] ");
  ASSERT_EQ(rank0.size(), 2u) << out;
  EXPECT_EQ(rank0, testing::printed_values(out, "train_microbatch ", "[rank 1] ")) << "the ranks must agree";
  EXPECT_LT(rank0.front(), 256) << out;
}

// Dropout under TP (GPT-2's 0.1 after the embeddings and after each block's attention and MLP, where every rank of the
// group holds the whole activation): the group's ranks share a seed, so they draw the masks one process draws, and
// TP 2 and TP 4 reach its weights (1e-10). Seeded by global rank (Composer's rank_zero_seed + rank) the ranks' masks
// differed, and so did their replicated activations.
TEST_F(TensorParallelTest, DropoutUnderTpDrawsOneProcesssMasks) {
  testing::ScopedEnv env;
  env.set("TP_WORKER_DROPOUT", "0.1");
  run("drop-one", "gpt2", "one", 1);
  expect_run_equals("drop-one", "drop-tp2", "gpt2", "tp2", 2);
  expect_run_equals("drop-one", "drop-tp4", "gpt2", "tp4", 4);
}

// A model built under nn::DeferredInit splits before it holds values: each unit is drawn whole as one process draws
// it, this rank's tensor-parallel part kept and then sharded, so the TP 2 and 2 x 2 runs (untied, and tied with the
// embedding's rows split) train to the weights of the same deferred model materialized whole on one process.
TEST_F(TensorParallelTest, DeferredModelsSplitAsTheyMaterializeAndEqualOneProcess) {
  testing::ScopedEnv env;
  env.set("TP_WORKER_DEFERRED", "1");
  run("deferred-one", "llama", "one", 1);
  expect_run_equals("deferred-one", "deferred-tp2", "llama", "tp2", 2);
  env.set("TP_WORKER_TIED", "1");
  run("deferred-tied-one", "llama", "one", 1);
  expect_run_equals("deferred-tied-one", "deferred-tied-2x2", "llama", "2x2", 4);
}

// Activation checkpointing of the decoder layers under TP 2 and 2 x 2 with sequence parallelism: the backward
// recomputes each layer's forward, its tensor-parallel collectives in the same order on every rank, and the runs
// train to one process's weights (which checkpointing does not change).
TEST_F(TensorParallelTest, ActivationCheckpointingUnderTpEqualsOneProcess) {
  testing::ScopedEnv env;
  env.set("TP_WORKER_SEQUENCE_PARALLEL", "1");
  run("ac-one", "llama", "one", 1);
  env.set("TP_WORKER_ACTIVATION_CHECKPOINTING", "1");
  expect_run_equals("ac-one", "ac-tp2", "llama", "tp2", 2);
  expect_run_equals("ac-one", "ac-2x2", "llama", "2x2", 4);
}

TEST_F(TensorParallelTest, EmaAndOptimizerMonitorUnderFsdp2xTp2EqualOneProcess) {
  testing::ScopedEnv env;
  env.set("TP_WORKER_ALGORITHM", "ema");
  env.set("TP_WORKER_GRAD_NORMS", "1");
  const std::string one = run("ema-one", "llama", "one", 1);
  const std::string mesh = expect_run_equals("ema-one", "ema-2x2", "llama", "2x2", 4);
  expect_same_weights("ema-one", "ema-2x2", ".ema");
  const auto theirs = testing::printed_pairs(one, "monitored "), mine = testing::printed_pairs(mesh, "monitored ");
  ASSERT_GT(theirs.size(), 10u) << one;
  ASSERT_EQ(mine.size(), theirs.size()) << mesh;
  for (const auto& [key, value] : theirs) EXPECT_NEAR(mine.at(key), value, 1e-8 * std::abs(value) + 1e-12) << key;
}

// SAM's ascent norm over every rank's part (split parameters over the group, the others once) and SWA's averages
// of the parts: FSDP 2 x TP 2 equals one process, and each differs from the plain run.
TEST_F(TensorParallelTest, SamAndSwaUnderFsdp2xTp2EqualOneProcess) {
  testing::ScopedEnv env;
  run("plain-one", "llama", "one", 1);
  const auto plain = testing::read_pickled_tensors(dir / "plain-one.pt");
  for (const std::string algorithm : {"sam", "swa"}) {
    env.set("TP_WORKER_ALGORITHM", algorithm);
    run(algorithm + "-one", "llama", "one", 1);
    expect_run_equals(algorithm + "-one", algorithm + "-2x2", "llama", "2x2", 4);
    double moved = 0;
    for (const auto& [name, t] : testing::read_pickled_tensors(dir / (algorithm + "-one.pt")))
      moved = std::max(moved, (t - plain.at(name)).abs().max().item<double>());
    EXPECT_GT(moved, 1e-6) << algorithm;
  }
}

TEST_F(TensorParallelTest, UserPlanSplittingTheMlpOnlyEqualsOneProcess) {
  testing::ScopedEnv env;
  env.set("TP_WORKER_PLAN", "mlp");
  run("plan-one", "llama", "one", 1);
  expect_run_equals("plan-one", "plan-tp2", "llama", "tp2", 2);
}

TEST_F(TensorParallelTest, FullCheckpointOfTp2ResumesOnOneProcessOnFsdp4AndOn2x2) {
  testing::ScopedEnv env;
  env.set("TP_WORKER_STEPS", "8");
  run("straight", "llama", "one", 1);  // 8 batches without a stop
  env.set("TP_WORKER_STEPS", "4");
  env.set("TP_WORKER_SAVE", (dir / "saved").string());
  run("first-half", "llama", "tp2", 2);
  const fs::path ckpt = dir / "saved" / "ep0-ba4-rank0.pt";
  ASSERT_TRUE(fs::exists(ckpt)) << "no " << ckpt;
  env.set("TP_WORKER_SAVE", "");
  env.set("TP_WORKER_LOAD", ckpt.string());
  expect_run_equals("straight", "resumed-one", "llama", "one", 1);
  expect_run_equals("straight", "resumed-fsdp4", "llama", "fsdp4", 4);
  expect_run_equals("straight", "resumed-2x2", "llama", "2x2", 4);
}

// state_dict_type sharded: each rank writes its tensor-parallel part of each split parameter (as boxes of the whole
// tensor) and the first tensor-parallel rank the rest. The 2 x 2 checkpoint holds what one process's full
// checkpoint holds, PyTorch's torch.distributed.checkpoint reads it into the same tensors, and it resumes on one
// process, on TP 2 and on FSDP over 4 ranks; a TP 2 checkpoint resumes on FSDP over 4 ranks and on 2 x 2.
TEST_F(TensorParallelTest, ShardedCheckpointsReloadOnOtherLayoutsAndPyTorchReadsThem) {
  testing::ScopedEnv env;
  env.set("TP_WORKER_STEPS", "8");
  run("straight", "llama", "one", 1);
  env.set("TP_WORKER_STEPS", "4");
  env.set("TP_WORKER_SAVE", (dir / "one-saved").string());
  run("one-half", "llama", "one", 1);
  env.set("TP_WORKER_SHARDED", "1");
  for (const auto& [layout, ranks] : std::vector<std::pair<std::string, int>>{{"2x2", 4}, {"tp2", 2}}) {
    env.set("TP_WORKER_SAVE", (dir / (layout + "-saved")).string());
    run(layout + "-half", "llama", layout, ranks);
  }
  env.set("TP_WORKER_SAVE", "");
  const fs::path one_ckpt = dir / "one-saved" / "ep0-ba4-rank0.pt";
  const fs::path mesh_ckpt = dir / "2x2-saved" / "ep0-ba4", tp_ckpt = dir / "tp2-saved" / "ep0-ba4";
  ASSERT_TRUE(fs::exists(mesh_ckpt / ".metadata"));
  for (int rank = 0; rank < 4; ++rank) EXPECT_TRUE(fs::exists(mesh_ckpt / distcp_file_name(rank))) << rank;
  // 14 split and 7 whole parameters, each with DecoupledAdamW's step, exp_avg and exp_avg_sq.
  EXPECT_EQ(testing::expect_same_checkpoint_state(one_ckpt.string(), mesh_ckpt.string(), 1e-10), 21 * 4);
  EXPECT_EQ(testing::expect_same_checkpoint_state(one_ckpt.string(), tp_ckpt.string(), 1e-10), 21 * 4);
  const std::string converted = (dir / "converted.pt").string();
  const auto py = testing::run_python({"-c",
                                       "import sys; from torch.distributed.checkpoint.format_utils import "
                                       "dcp_to_torch_save; dcp_to_torch_save(sys.argv[1], sys.argv[2])",
                                       mesh_ckpt.string(), converted});
  ASSERT_EQ(py.status, 0) << py.output;
  EXPECT_EQ(testing::expect_same_checkpoint_state(mesh_ckpt.string(), converted, 0), 21 * 4);
  const std::vector<std::tuple<fs::path, std::string, int>> resumes{{mesh_ckpt, "one", 1},
                                                                    {mesh_ckpt, "tp2", 2},
                                                                    {mesh_ckpt, "fsdp4", 4},
                                                                    {tp_ckpt, "fsdp4", 4},
                                                                    {tp_ckpt, "2x2", 4}};
  for (const auto& [ckpt, layout, ranks] : resumes) {
    env.set("TP_WORKER_LOAD", ckpt.string());
    const std::string name = "from-" + ckpt.parent_path().filename().string() + "-on-" + layout;
    expect_run_equals("straight", name, "llama", layout, ranks);
  }
}

// GPT-2's fused c_attn: each rank's piece is a slice of each of three blocks, written as boxes of the whole tensor.
TEST_F(TensorParallelTest, ShardedCheckpointOfGpt2FusedAttentionResumesOnOneProcess) {
  testing::ScopedEnv env;
  env.set("TP_WORKER_STEPS", "8");
  run("gpt-straight", "gpt2", "one", 1);
  env.set("TP_WORKER_STEPS", "4");
  env.set("TP_WORKER_SHARDED", "1");
  env.set("TP_WORKER_SAVE", (dir / "gpt-saved").string());
  run("gpt-half", "gpt2", "2x2", 4);
  env.set("TP_WORKER_SAVE", "");
  env.set("TP_WORKER_LOAD", (dir / "gpt-saved" / "ep0-ba4").string());
  expect_run_equals("gpt-straight", "gpt-resumed", "gpt2", "one", 1);
  expect_run_equals("gpt-straight", "gpt-resumed-tp2", "gpt2", "tp2", 2);
}

TEST_F(TensorParallelTest, ADegreeThatDoesNotSplitTheHeadsIsAClearError) {
  const std::string out = (dir / "bad.pt").string();
  const auto r = run_worker(launch(3, {TP_WORKER, out, "gpt2", "tp3"}), 120);
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("parallelism_config.tp.tensor_parallel_degree 3 does not split"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("heads"), std::string::npos) << r.output;
}

// From YAML through composer-cpp: tensor_parallel_degree 2 on 2 ranks (one data-parallel place, the whole batch of
// 8 on each rank; the vocabulary split, the loss from its slices) trains as DDP on 2 ranks with 4 each does (float32).
TEST_F(TensorParallelTest, CliConfigWithTpTrainsAsDdpWithTheSameGlobalBatch) {
  const auto run_cli = [&](const std::string& name, int batch, const std::string& parallelism) {
    const std::string cfg = (dir / (name + ".yaml")).string();
    std::ofstream(cfg) << "model: {name: llama, hidden_size: 32, intermediate_size: 48, num_hidden_layers: 2,\n"
                          "        num_attention_heads: 4, num_key_value_heads: 2}\n"
                          "train_data: {dataset: synthetic_tokens, vocab_size: 64, num_samples: 64, seq_len: 16,\n"
                          "             batch_size: "
                       << batch
                       << "}\noptimizer: {name: decoupled_adamw, lr: 0.01}\n"
                          "max_duration: 4ba\nseed: 3\nprogress_bar: false\nloggers: []\nsave_folder: "
                       << (dir / name).string() << "\nsave_interval: 4ba\n"
                       << parallelism;
    const auto r = run_worker(testing::launch_argv(COMPOSER_CPP, 2, {"train", cfg}), 300);
    EXPECT_EQ(r.status, 0) << r.output;
    return read_checkpoint((dir / name / "latest-rank0.pt").string())
        .toGenericDict()
        .at("state")
        .toGenericDict()
        .at("model")
        .toGenericDict();
  };
  const auto ddp = run_cli("ddp", 4, "");
  const auto tp =
      run_cli("tp", 8, "parallelism_config: {fsdp: {}, tp: {tensor_parallel_degree: 2, loss_parallel: true}}\n");
  ASSERT_EQ(ddp.size(), tp.size());
  for (const auto& e : ddp) {
    const std::string key = e.key().toStringRef();
    ASSERT_TRUE(tp.contains(key)) << key;
    const at::Tensor a = e.value().toTensor(), b = tp.at(key).toTensor();
    ASSERT_EQ(a.sizes(), b.sizes()) << key;  // whole tensors in the checkpoint
    // float32 sums in another order, through 4 Adam steps of lr 0.01 (which scale small gradients up): within 5e-4;
    // another global batch (the data split by world size instead of by data-parallel place) moves them by ~1e-2.
    EXPECT_LT((a - b).abs().max().item<double>(), 5e-4) << key;
  }
}

TEST(TensorParallelSplit, CutsEachBlockAndPutsItBack) {
  const at::Tensor whole = at::arange(24, at::kDouble).view({6, 4});
  dist::TensorParallelSplit rows{0, 3, 2, 1};  // three blocks of two rows, rank 1 of 2: rows 1, 3, 5
  EXPECT_TRUE(rows.local_of(whole).equal(whole.index_select(0, at::tensor({1, 3, 5}))));
  dist::TensorParallelSplit cols{1, 1, 2, 0};  // the first two columns
  EXPECT_TRUE(cols.local_of(whole).equal(whole.narrow(1, 0, 2)));
  for (const auto& s : {rows, cols}) {
    std::vector<at::Tensor> parts;
    for (int64_t r = 0; r < 2; ++r) {
      dist::TensorParallelSplit at_rank = s;
      at_rank.rank = r;
      parts.push_back(at_rank.local_of(whole));
    }
    EXPECT_TRUE(s.whole_of(parts).equal(whole));
  }
}

TEST(TensorParallelPlanTest, ModelZooPlansAndTheirErrors) {
  auto llama = std::make_shared<models::Llama>(models::LlamaConfig()
                                                   .vocab_size(32)
                                                   .hidden_size(32)
                                                   .intermediate_size(48)
                                                   .num_hidden_layers(1)
                                                   .num_attention_heads(4)
                                                   .num_key_value_heads(2)
                                                   .max_position_embeddings(16));
  const dist::TensorParallelPlan plan = dist::default_tensor_parallel_plan(*llama);
  std::map<std::string, std::pair<nn::ParallelStyle, int64_t>> by_name;
  for (const auto& e : plan) by_name[e.name] = {e.style, e.granule};
  EXPECT_EQ(by_name.size(), 12u);
  EXPECT_EQ(by_name.at("model.layers.0.input_layernorm").first, nn::ParallelStyle::SEQUENCE);  // only when asked
  EXPECT_EQ(by_name.at("model.norm").first, nn::ParallelStyle::SEQUENCE);
  EXPECT_EQ(by_name.at("model.embed_tokens").first, nn::ParallelStyle::ROWWISE);  // the vocabulary
  const auto head = std::find_if(plan.begin(), plan.end(), [](const auto& e) { return e.name == "lm_head"; });
  ASSERT_NE(head, plan.end());
  EXPECT_TRUE(head->vocabulary_head);
  EXPECT_EQ(by_name.at("model.layers.0.self_attn.k_proj"), std::make_pair(nn::ParallelStyle::COLWISE, int64_t{8}));
  EXPECT_EQ(by_name.at("model.layers.0.self_attn.o_proj"), std::make_pair(nn::ParallelStyle::ROWWISE, int64_t{8}));
  EXPECT_EQ(by_name.at("model.layers.0.mlp.down_proj").first, nn::ParallelStyle::ROWWISE);
  auto gpt = std::make_shared<models::GPT>(
      models::TransformerConfig().vocab_size(32).max_seq_len(16).n_layer(1).n_head(2).d_model(16));
  const dist::TensorParallelPlan gpt_plan = dist::default_tensor_parallel_plan(*gpt);
  ASSERT_EQ(gpt_plan.size(), 8u);  // the block's four linears and two norms, the sequence region's start and end
  std::map<std::string, nn::ParallelStyle> gpt_styles;
  for (const auto& e : gpt_plan) gpt_styles[e.name] = e.style;
  EXPECT_EQ(gpt_styles.at("drop"), nn::ParallelStyle::SEQUENCE_START);
  EXPECT_EQ(gpt_styles.at("ln_f"), nn::ParallelStyle::SEQUENCE_END);
  EXPECT_EQ(gpt_styles.at("h.0.ln_2"), nn::ParallelStyle::SEQUENCE);
  const auto c_attn = std::find_if(gpt_plan.begin(), gpt_plan.end(),
                                   [](const nn::ParallelLayerPlan& e) { return e.name == "h.0.attn.c_attn"; });
  ASSERT_NE(c_attn, gpt_plan.end());
  EXPECT_EQ(c_attn->chunks, 3);  // queries, keys and values: each rank its heads' slice of each
  EXPECT_EQ(c_attn->granule, 8);
  // A one-rank group splits nothing but checks the plan, and the forward still runs.
  const auto wrong = [](torch::nn::Module& m, dist::TensorParallelPlan p) {
    try {
      dist::parallelize(m, dist::Group(), dist::TPOptions().layer_plan(p));
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(wrong(*llama, {{"model.norm", nn::ParallelStyle::COLWISE}}).find("not a composer::nn::Linear"),
            std::string::npos);
  EXPECT_NE(wrong(*llama, {{"model.layers.*.mlp.gate", nn::ParallelStyle::COLWISE}}).find("matches no module"),
            std::string::npos);
  EXPECT_NE(wrong(*llama, {{"model.embed_tokens", nn::ParallelStyle::COLWISE}}).find("an embedding splits rowwise"),
            std::string::npos);
  torch::nn::Sequential plain(torch::nn::Linear(2, 2));
  try {
    dist::default_tensor_parallel_plan(*plain);
    ADD_FAILURE() << "a model without a plan";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("give TPOptions::layer_plan"), std::string::npos) << e.what();
  }
  try {  // sequence parallelism starts at a split embedding
    dist::parallelize(*llama, dist::Group(),
                      dist::TPOptions().sequence_parallel(true).layer_plan(
                          dist::TensorParallelPlan{{"model.layers.*.mlp.gate_proj", nn::ParallelStyle::COLWISE}}));
    ADD_FAILURE() << "sequence parallelism without a split embedding";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("sequence_parallel: the plan splits no embedding rowwise and marks no "
                                         "sequence_start layer"),
              std::string::npos)
        << e.what();
  }
  auto fresh = std::make_shared<models::Llama>(llama->config());
  const auto split = dist::parallelize(*fresh, dist::Group(), dist::TPOptions().sequence_parallel(true));
  EXPECT_EQ(split.size(), 9u);  // the weights (no biases)
  EXPECT_EQ(fresh->forward(at::randint(32, {2, 5}, at::kLong)).sizes(), (std::vector<int64_t>{2, 5, 32}));
}

}  // namespace
}  // namespace composer
