#include "cli/commands.h"
#include "composer/composer.h"
#include "composer/core/parallelism_fields.h"
#include "composer/data/finetuning.h"
#include "composer/formats/safetensors.h"
#include "support/data_paths.h"
#include "support/mlflow_server.h"
#include "support/moto_server.h"
#include "support/python.h"
#include "support/scoped_env.h"
#include "support/silent_listener.h"

#include <gtest/gtest.h>

#include <chrono>

#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace composer::cli {
namespace {

namespace fs = std::filesystem;

struct CliTest : ::testing::Test {
  fs::path dir = fs::temp_directory_path() / ("composer_cli_" + std::to_string(::getpid()));
  std::ostringstream out, err;
  void SetUp() override { fs::create_directories(dir); }
  void TearDown() override { fs::remove_all(dir); }
  std::string config(const std::string& name, const std::string& yaml) {
    const std::string p = (dir / name).string();
    std::ofstream(p) << yaml;
    return p;
  }
  int train(const std::string& cfg, std::vector<std::string> overrides = {}) {
    out.str("");
    err.str("");
    return train_command(cfg, overrides, out, err);
  }
  static std::string synthetic(const std::string& extra = "") {
    return "model: {name: mlp, in_features: 64, hidden: [16]}\n"
           "train_data: {dataset: synthetic_images, channels: 1, size: 8, num_samples: 128, batch_size: 32, "
           "num_workers: 0}\n"
           "max_duration: 2ba\nprogress_bar: false\n" +
           extra;
  }
};

TEST_F(CliTest, UnknownKeyNamesItsPathAndTheAllowedKeys) {
  EXPECT_EQ(train(config("a.yaml", synthetic("optimizer: {name: sgd, lr: 0.1, momentun: 0.9}\n"))), 2);
  EXPECT_NE(err.str().find("optimizer.momentun: unknown hyperparameter"), std::string::npos) << err.str();
  EXPECT_NE(err.str().find("momentum"), std::string::npos) << err.str();
  EXPECT_EQ(train(config("b.yaml", synthetic("max_durration: 3ba\n"))), 2);
  EXPECT_NE(err.str().find("max_durration: unknown key"), std::string::npos) << err.str();
}

// Every kind is built by the library's registries from the same keys Composer's classes take.
TEST_F(CliTest, RegistriesBuildEveryKindFromItsKeys) {
  ASSERT_EQ(train(config("r.yaml", synthetic("optimizer: {name: adam, lr: 0.01, betas: [0.8, 0.9]}\n"
                                             "schedulers: [{name: multistep_with_warmup, t_warmup: 1ba, "
                                             "milestones: [1ba, 2ba], gamma: 0.5}]\n"
                                             "callbacks: [{name: speed_monitor, window_size: 1}, {name: LRMonitor}]\n"
                                             "loggers: [{name: file, flush_interval: 1, filename: " +
                                             (dir / "r.jsonl").string() + "}]\n")),
                  {"model={name: mlp, hidden: [8, 8]}", "auto_log_hparams=true", "tune_allocator=false",
                   "eval_interval=2", "load_ignore_keys=[state/optimizers]"}),
            0)
      << err.str();
  const std::string log = testing::read_text((dir / "r.jsonl").string());
  // Trainer settings are TrainerOptions' field list; with auto_log_hparams they are logged as read.
  EXPECT_NE(log.find("\"eval_interval\":\"2ep\""), std::string::npos) << log;
  EXPECT_NE(log.find("\"load_ignore_keys\":[\"state/optimizers\"]"), std::string::npos) << log;
  EXPECT_NE(log.find("\"tune_allocator\":false"), std::string::npos) << log;
  EXPECT_NE(log.find("\"lr-Adam/group0\""), std::string::npos) << log;
  EXPECT_NE(log.find("\"throughput/batches_per_sec\""), std::string::npos) << log;
}

// docs/cli.md's settings table is TrainerOptions' field list. To rewrite it after changing a field:
// COMPOSER_WRITE_DOCS=1 ./build/tests/cli_test --gtest_filter=CliTest.DocsListTheTrainerSettings
TEST_F(CliTest, DocsListTheTrainerSettings) {
  const std::string path = testing::source_dir() + "/docs/cli.md";
  std::string page = testing::read_text(path);
  const std::string marker = "`None` is unset.\n\n";
  const auto start = page.find(marker);
  ASSERT_NE(start, std::string::npos) << path << " has no '" << marker << "'";
  const auto end = page.find("\n\n", start + marker.size());
  ASSERT_NE(end, std::string::npos);
  const std::string table = fields_table(describe_fields(TrainerOptions(nullptr)));
  if (std::getenv("COMPOSER_WRITE_DOCS")) {
    page.replace(start + marker.size(), end + 1 - start - marker.size(), table);
    std::ofstream(path) << page;
    page = testing::read_text(path);
  }
  EXPECT_EQ(page.substr(start + marker.size(), table.size()), table) << path << " should list:\n" << table;
}

// docs/fsdp.md's table of the parallelism_config.fsdp keys is FSDPOptions' field list (the CLI reads the section
// through it). Rewrite it with COMPOSER_WRITE_DOCS=1 ./build/tests/cli_test --gtest_filter=CliTest.FsdpDocsListItsKeys
TEST_F(CliTest, FsdpDocsListItsKeys) {
  const std::string path = testing::source_dir() + "/docs/fsdp.md";
  std::string page = testing::read_text(path);
  const std::string marker = "The keys of `parallelism_config.fsdp` (`FSDPOptions`' field list):\n\n";
  const auto start = page.find(marker);
  ASSERT_NE(start, std::string::npos) << path << " has no '" << marker << "'";
  const auto end = page.find("\n\n", start + marker.size());
  ASSERT_NE(end, std::string::npos);
  const std::string table = fields_table(describe_fields<dist::FSDPOptions>());
  if (std::getenv("COMPOSER_WRITE_DOCS")) {
    page.replace(start + marker.size(), end + 1 - start - marker.size(), table);
    std::ofstream(path) << page;
    page = testing::read_text(path);
  }
  EXPECT_EQ(page.substr(start + marker.size(), table.size()), table) << path << " should list:\n" << table;
}

TEST_F(CliTest, WrongTypesAndValues) {
  EXPECT_EQ(train(config("a.yaml", synthetic()), {"train_data.batch_size=lots"}), 2);
  EXPECT_NE(err.str().find("train_data.batch_size: expected an integer, got 'lots'"), std::string::npos) << err.str();
  EXPECT_EQ(train(config("b.yaml", synthetic()), {"max_duration=2 epochs"}), 2);
  EXPECT_NE(err.str().find("max_duration"), std::string::npos) << err.str();
  EXPECT_EQ(train(config("c.yaml", synthetic()), {"precision=fp64"}), 2);
  EXPECT_NE(err.str().find("precision: Invalid precision 'fp64'"), std::string::npos) << err.str();
  EXPECT_EQ(train(config("d.yaml", synthetic()), {"model.name=transformer9000"}), 2);
  EXPECT_NE(err.str().find("model.name: unknown model 'transformer9000'; registered: bert, cifar_resnet, gpt, "
                           "hf_causal_lm, hf_masked_lm, llama, mlp"),
            std::string::npos)
      << err.str();
  EXPECT_EQ(train(config("e.yaml", synthetic()), {"train_data.batch_size=0"}), 2);
  EXPECT_NE(err.str().find("train_data.batch_size: expected a positive integer"), std::string::npos) << err.str();
  EXPECT_EQ(train(config("f.yaml", synthetic("schedulers: [{name: linear_with_warmup}]\n"))), 2);
  EXPECT_NE(err.str().find("schedulers.0.t_warmup: required (the warmup duration)"), std::string::npos) << err.str();
  EXPECT_EQ(train(config("f2.yaml", synthetic("schedulers: [{name: multistep, milestones: [2ba, soon]}]\n"))), 2);
  EXPECT_NE(err.str().find("schedulers.0.milestones: expected a time such as '2ep' or '100ba', got 'soon'"),
            std::string::npos)
      << err.str();
  EXPECT_EQ(train(config("f3.yaml", synthetic("optimizer: {name: adam, betas: [0.9, 0.99, 0.999]}\n"))), 2);
  EXPECT_NE(err.str().find("optimizer.betas: expected two numbers"), std::string::npos) << err.str();
  EXPECT_EQ(train(config("f4.yaml", synthetic("callbacks: [{name: threshold_stopper, monitor: Accuracy}]\n"))), 2);
  EXPECT_NE(err.str().find("callbacks.0.dataloader_label: required"), std::string::npos) << err.str();
  EXPECT_EQ(train(config("f5.yaml", synthetic()), {"model.hidden=[8, wide]"}), 2);
  EXPECT_NE(err.str().find("model.hidden: expected an integer, got 'wide'"), std::string::npos) << err.str();
  EXPECT_EQ(train(config("g.yaml", synthetic("algorithms: [{name: BlurPol}]\n"))), 2);
  EXPECT_NE(err.str().find("algorithms.0.name: unknown algorithm 'BlurPol'; registered: alibi, augmix, blurpool"),
            std::string::npos)
      << err.str();
  EXPECT_EQ(train(config("h.yaml", synthetic("algorithms: [{name: mixup, alpha: lots}]\n"))), 2);
  EXPECT_NE(err.str().find("algorithms.0.alpha: expected a number, got 'lots'"), std::string::npos) << err.str();
  EXPECT_EQ(train(config("i.yaml", synthetic("algorithms: [{name: cutout, holes: 2}]\n"))), 2);
  EXPECT_NE(err.str().find("algorithms.0.holes: unknown hyperparameter; known:"), std::string::npos) << err.str();
  EXPECT_EQ(train(config("j.yaml", synthetic("algorithms: [{name: label_smoothing, smoothing: 1.5}]\n"))), 2);
  EXPECT_NE(err.str().find("LabelSmoothing.smoothing must be in [0.0, 1.0], got 1.5"), std::string::npos) << err.str();
}

// object_store: {...} sets the options of every store the run makes: a load_path on an endpoint that accepts
// connections and never answers fails after num_attempts x timeout, saying so at each retry (it was 5 x 120 s).
TEST_F(CliTest, ObjectStoreTimeoutsComeFromYaml) {
  const testing::SilentListener silent;
  const std::string url = silent.url() + "/ckpt.pt";
  ::testing::internal::CaptureStderr();
  const auto start = std::chrono::steady_clock::now();
  const int status =
      train(config("silent.yaml", synthetic("load_path: " + url + "\nobject_store: {timeout: 1, num_attempts: 2}\n")));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(status, 0);
  EXPECT_LT(seconds, 30.0);
  EXPECT_NE(said.find("on attempt 1 of 2; retrying (timeout 1 s per attempt)"), std::string::npos) << said;
  EXPECT_NE(err.str().find("ckpt.pt"), std::string::npos) << err.str();
  EXPECT_EQ(default_object_store_options().timeout(), 1.0);
  // The next run without the section is back to the defaults; bad values and keys name the section.
  ASSERT_EQ(train(config("plain.yaml", synthetic())), 0) << err.str();
  EXPECT_EQ(default_object_store_options().timeout(), 120.0);
  EXPECT_EQ(train(config("bad.yaml", synthetic("object_store: {num_attempts: 0}\n"))), 2);
  EXPECT_NE(err.str().find("object_store: ObjectStoreOptions: num_attempts = 0: expected >= 1"), std::string::npos)
      << err.str();
  EXPECT_EQ(train(config("typo.yaml", synthetic("object_store: {timout: 3}\n"))), 2);
  EXPECT_NE(err.str().find("object_store.timout: unknown hyperparameter"), std::string::npos) << err.str();
}

// Values that LibTorch or the loops would have refused later, without naming the key, are config errors naming it.
TEST_F(CliTest, HostileValuesNameTheirKeys) {
  const auto expect = [&](const std::string& yaml, const std::vector<std::string>& overrides, const std::string& text) {
    EXPECT_NE(train(config("hostile.yaml", yaml), overrides), 0) << text;
    EXPECT_NE(err.str().find(text), std::string::npos) << err.str();
  };
  expect(synthetic(), {"optimizer={name: sgd, lr: -1}"}, "optimizer.lr: expected a learning rate >= 0, got -1");
  expect(synthetic(), {"optimizer={name: adam, betas: [0.9, 1.5]}"}, "optimizer.betas: expected two numbers in [0, 1)");
  expect(synthetic(), {"train_subset_num_batches=0"}, "train_subset_num_batches must be -1 (all) or >= 1, got 0");
  expect(synthetic(), {"model.hidden=[-1]"}, "model.hidden[0] = -1: expected a positive number");
  expect(synthetic(), {"model={name: mnist_cnn, width: 0}", "train_data.size=28"},
         "model.width = 0: expected a positive number");
  expect(synthetic(), {"cuda_graph_warmup_steps=-1"}, "cuda_graph_warmup_steps must be >= 1");
  expect(synthetic(), {"train_data={dataset: streaming, local: /nonexistent, num_classes: -3}"},
         "num_classes: expected 0 (not given) or a positive number of classes, got -3");
  expect("? [a, b]\n: 1\n" + synthetic(), {}, "a key at line 1 is a list; keys must be plain names");
  // yaml-cpp folds every later line into a quote left open in a file that ends in a newline; PyYAML refuses it.
  const std::string open_quote = synthetic() + "run_name: \"abc\nseed: 3\n";
  const auto quote_line = std::count(open_quote.begin(), open_quote.end(), '\n') - 1;
  expect(open_quote, {},
         "line " + std::to_string(quote_line) + ": the double quote opened at column 11 is never closed");
  for (const char* closed : {"run_name: \"it's \\\" here\"\n", "run_name: 'it''s \" here'\n"})
    EXPECT_EQ(train(config("quotes.yaml", synthetic(closed))), 0) << closed << err.str();
  expect(synthetic(), {"algorithms=[{name: ema, half_life: 2ba, smoothing: 0.9}]"},
         "only one of half_life or smoothing may be set");
  // EMA's documented `half_life: null` (Python's None) unsets the optional field, so smoothing alone is used.
  EXPECT_EQ(train(config("ema.yaml", synthetic("algorithms: [{name: ema, half_life: null, smoothing: 0.9}]\n"))), 0)
      << err.str();
}

// llm-foundry's init_device: meta builds the model under nn::DeferredInit and FSDP draws it unit by unit; without
// FSDP the Trainer draws it whole; a pretrained directory is read when it is sharded. Another value is an error
// naming the key.
TEST_F(CliTest, InitDeviceMetaDefersTheModelsWeights) {
  EXPECT_EQ(train(config("a.yaml", synthetic("parallelism_config: {fsdp: {sharding_strategy: FULL_SHARD}}\n")),
                  {"model.init_device=meta"}),
            0)
      << err.str();
  EXPECT_EQ(train(config("b.yaml", synthetic()), {"model.init_device=meta"}), 0) << err.str();
  EXPECT_EQ(train(config("c.yaml", synthetic()), {"model.init_device=gpu"}), 2);
  EXPECT_NE(err.str().find("model.init_device: 'gpu'; expected cpu (build the weights now) or meta"), std::string::npos)
      << err.str();
  // A pretrained Llama directory, deferred and read when FSDP shards it: it trains to the weights a whole load does.
  const fs::path hf = dir / "llama_hf";
  models::save_llama_hf(*std::make_shared<models::Llama>(models::LlamaConfig()
                                                             .vocab_size(40)
                                                             .hidden_size(16)
                                                             .intermediate_size(24)
                                                             .num_hidden_layers(2)
                                                             .num_attention_heads(2)
                                                             .max_position_embeddings(16)),
                        hf.string());
  const auto trained = [&](const std::string& device, const std::string& lora = "") {
    const std::string yaml =
        "model: {name: hf_causal_lm, pretrained: " + hf.string() + ", init_device: " + device + lora +
        "}\ntrain_data: {dataset: synthetic_tokens, vocab_size: 40, seq_len: 16, num_samples: 16, batch_size: 4}\n"
        "optimizer: {name: decoupled_adamw, lr: 0.01}\nmax_duration: 2ba\nprogress_bar: false\nloggers: []\n"
        "parallelism_config: {fsdp: {sharding_strategy: FULL_SHARD}}\nsave_folder: " +
        (dir / (lora.empty() ? device : device + "_lora")).string() + "\n";
    EXPECT_EQ(train(config(device + ".yaml", yaml)), 0) << err.str();
    return read_checkpoint((dir / (lora.empty() ? device : device + "_lora") / "latest-rank0.pt").string())
        .toGenericDict()
        .at("state")
        .toGenericDict()
        .at("model")
        .toGenericDict();
  };
  const auto whole = trained("cpu"), deferred = trained("meta");
  ASSERT_EQ(whole.size(), deferred.size());
  for (const auto& e : whole)
    EXPECT_TRUE(at::equal(e.value().toTensor(), deferred.at(e.key()).toTensor())) << e.key().toStringRef();
  // With LoRA adapters on the deferred model: the same adapters drawn and trained, the same frozen base.
  const std::string lora = ", lora: {r: 2, lora_alpha: 4}";
  const auto whole_lora = trained("cpu", lora), deferred_lora = trained("meta", lora);
  ASSERT_EQ(whole_lora.size(), whole.size() + 8);  // lora_A and lora_B of q_proj and v_proj in 2 layers
  for (const auto& e : whole_lora)
    EXPECT_TRUE(at::equal(e.value().toTensor(), deferred_lora.at(e.key()).toTensor())) << e.key().toStringRef();
}

// parallelism_config.fsdp trains (one process: every shard is the whole buffer); Composer's other FSDP keys are
// accepted at Composer's default only.
TEST_F(CliTest, ParallelismConfigFsdpTrainsAndNamesUnsupportedKeys) {
  EXPECT_EQ(train(config("a.yaml", synthetic("parallelism_config: {fsdp: {sharding_strategy: SHARD_GRAD_OP, "
                                             "state_dict_type: full, limit_all_gathers: true, "
                                             "load_monolith_rank0_only: true}}\n"))),
            0)
      << err.str();
  // HYBRID_SHARD without data_parallel_replicate_degree (a 1-D mesh) runs as FULL_SHARD, with Composer's warning.
  std::ostringstream warnings;  // the library warns on std::cerr
  std::streambuf* const cerr = std::cerr.rdbuf(warnings.rdbuf());
  const int hybrid =
      train(config("b.yaml", synthetic("parallelism_config: {fsdp: {sharding_strategy: hybrid_shard}}\n")));
  std::cerr.rdbuf(cerr);
  EXPECT_EQ(hybrid, 0) << err.str();
  EXPECT_NE(warnings.str().find("FSDP sharding_strategy HYBRID_SHARD without data_parallel_replicate_degree: using "
                                "FULL_SHARD"),
            std::string::npos)
      << warnings.str();
  EXPECT_EQ(train(config("t.yaml", synthetic("parallelism_config: {fsdp: {sharding_strategy: HALF_SHARD}}\n"))), 2);
  EXPECT_NE(err.str().find("parallelism_config.fsdp.sharding_strategy must be FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, "
                           "HYBRID_SHARD or _HYBRID_SHARD_ZERO2, got 'HALF_SHARD'"),
            std::string::npos)
      << err.str();
  EXPECT_EQ(train(config("u.yaml", synthetic("parallelism_config: {fsdp: {data_parallel_shard_degree: 0}}\n"))), 2);
  EXPECT_NE(err.str().find("parallelism_config.fsdp.data_parallel_shard_degree must be a positive number of ranks "
                           "or -1, got 0"),
            std::string::npos)
      << err.str();
  // One process cannot hold two replicas.
  EXPECT_NE(train(config("v.yaml", synthetic("parallelism_config: {fsdp: {data_parallel_replicate_degree: 2}}\n"))), 0);
  EXPECT_NE(err.str().find("data_parallel_shard_degree -1, data_parallel_replicate_degree 2: their product must "
                           "divide the world size 1"),
            std::string::npos)
      << err.str();
  EXPECT_NE(train(config("c.yaml", synthetic("parallelism_config: {fsdp: {activation_cpu_offload: true}}\n"))), 0);
  EXPECT_NE(err.str().find("parallelism_config.fsdp.activation_cpu_offload needs activation_checkpointing: true"),
            std::string::npos)
      << err.str();
  EXPECT_EQ(train(config("w.yaml", synthetic("parallelism_config: {fsdp: {keep_low_precision_grads: true}}\n"))), 2);
  EXPECT_NE(err.str().find("parallelism_config.fsdp.keep_low_precision_grads: only Composer's default (false)"),
            std::string::npos)
      << err.str();
  // Activation checkpointing recomputes the sharding units (a GPT's blocks); an MLP has none to pick.
  EXPECT_EQ(train(config("k.yaml",
                         "model: {name: gpt, n_layer: 2, n_head: 2, d_model: 16, max_seq_len: 8}\n"
                         "train_data: {dataset: synthetic_tokens, vocab_size: 13, seq_len: 8, num_samples: "
                         "32, batch_size: 8}\nmax_duration: 2ba\nprogress_bar: false\n"
                         "parallelism_config: {fsdp: {activation_checkpointing: true}}\n")),
            0)
      << err.str();
  EXPECT_EQ(
      train(config("k2.yaml",
                   "model: {name: gpt, n_layer: 2, n_head: 2, d_model: 16, max_seq_len: 8}\n"
                   "train_data: {dataset: synthetic_tokens, vocab_size: 13, seq_len: 8, num_samples: "
                   "32, batch_size: 8}\nmax_duration: 2ba\nprogress_bar: false\n"
                   "parallelism_config: {fsdp: {activation_checkpointing: true, activation_cpu_offload: true}}\n")),
      0)
      << err.str();
  // The GPT's blocks gathered one by one, prefetched in both passes.
  EXPECT_EQ(train(config("m.yaml",
                         "model: {name: gpt, n_layer: 2, n_head: 2, d_model: 16, max_seq_len: 8}\n"
                         "train_data: {dataset: synthetic_tokens, vocab_size: 13, seq_len: 8, num_samples: "
                         "32, batch_size: 8}\nmax_duration: 2ba\nprogress_bar: false\n"
                         "parallelism_config: {fsdp: {backward_prefetch: backward_pre, forward_prefetch: true}}\n")),
            0)
      << err.str();
  EXPECT_EQ(train(config("n.yaml", synthetic("parallelism_config: {fsdp: {backward_prefetch: SOON}}\n"))), 2);
  EXPECT_NE(err.str().find("parallelism_config.fsdp.backward_prefetch must be BACKWARD_PRE, BACKWARD_POST or NONE, "
                           "got 'SOON'"),
            std::string::npos)
      << err.str();
  // mixed_precision: the GPT computing in bfloat16 (its float32 weights kept), PURE, and the errors.
  EXPECT_EQ(train(config("o.yaml",
                         "model: {name: gpt, n_layer: 2, n_head: 2, d_model: 16, max_seq_len: 8}\n"
                         "train_data: {dataset: synthetic_tokens, vocab_size: 13, seq_len: 8, num_samples: "
                         "32, batch_size: 8}\nmax_duration: 2ba\nprogress_bar: false\n"
                         "parallelism_config: {fsdp: {mixed_precision: {param_dtype: bf16, reduce_dtype: "
                         "float32}}}\n")),
            0)
      << err.str();
  EXPECT_EQ(train(config("p.yaml", synthetic("parallelism_config: {fsdp: {mixed_precision: pure}}\n"))), 0)
      << err.str();
  EXPECT_EQ(train(config("q.yaml", synthetic("parallelism_config: {fsdp: {mixed_precision: HALF}}\n"))), 2);
  EXPECT_NE(err.str().find("parallelism_config.fsdp.mixed_precision must be DEFAULT, PURE, FULL or a map of "
                           "param_dtype, reduce_dtype and buffer_dtype, got 'HALF'"),
            std::string::npos)
      << err.str();
  EXPECT_EQ(train(config("r.yaml", synthetic("parallelism_config: {fsdp: {mixed_precision: {param_dtype: int8}}}\n"))),
            2);
  EXPECT_NE(err.str().find("parallelism_config.fsdp.mixed_precision.param_dtype must be a floating dtype"),
            std::string::npos)
      << err.str();
  EXPECT_EQ(train(config("s.yaml", synthetic("parallelism_config: {fsdp: {mixed_precision: {param: bf16}}}\n"))), 2);
  EXPECT_NE(err.str().find("parallelism_config.fsdp.mixed_precision.param: unknown key"), std::string::npos)
      << err.str();
  EXPECT_NE(train(config("l.yaml", synthetic("parallelism_config: {fsdp: {activation_checkpointing: true}}\n"))), 0);
  EXPECT_NE(err.str().find("activation_checkpointing: no module of the model is picked"), std::string::npos)
      << err.str();
  EXPECT_EQ(train(config("j.yaml", synthetic("parallelism_config: {fsdp: {sync_module_states: maybe}}\n"))), 2);
  EXPECT_NE(err.str().find("parallelism_config.fsdp.sync_module_states"), std::string::npos) << err.str();
  EXPECT_NE(err.str().find("true or false"), std::string::npos) << err.str();
  EXPECT_EQ(train(config("d.yaml", synthetic("parallelism_config: {fsdp: {sharding_strategi: FULL_SHARD}}\n"))), 2);
  EXPECT_NE(err.str().find("parallelism_config.fsdp.sharding_strategi: unknown key"), std::string::npos) << err.str();
  EXPECT_EQ(train(config("e.yaml", synthetic("parallelism_config: {tp: {tensor_parallel_degree: 2}}\n"))), 2);
  EXPECT_NE(err.str().find("parallelism_config.tp needs parallelism_config.fsdp (as in Composer)"), std::string::npos)
      << err.str();
  EXPECT_EQ(train(config("t.yaml", synthetic("parallelism_config: {fsdp: {load_monolith_rank0_only: true}, tp: "
                                             "{tensor_parallel_degree: 2}}\n"))),
            2);
  EXPECT_NE(err.str().find("load_monolith_rank0_only is not compatible with tp"), std::string::npos) << err.str();
  EXPECT_EQ(train(config("u.yaml", synthetic("parallelism_config: {fsdp: {}, tp: {layer_plan: x}}\n"))), 2);
  EXPECT_NE(err.str().find("parallelism_config.tp.layer_plan: unknown key"), std::string::npos) << err.str();
  // Automatic microbatching runs under FSDP (one process here; two ranks under a memory limit: dist_test).
  EXPECT_EQ(train(config("g.yaml", synthetic("parallelism_config: {fsdp: {}}\ndevice_train_microbatch_size: auto\n"))),
            0)
      << err.str();
  // Full checkpoints (Composer's default state_dict_type) and sharded ones (a directory per checkpoint) save.
  const std::string saving =
      "parallelism_config: {fsdp: {}}\nsave_interval: 1ba\nsave_folder: " + (dir / "ckpt").string() + "\n";
  EXPECT_EQ(train(config("f.yaml", synthetic(saving))), 0) << err.str();
  EXPECT_TRUE(fs::exists(dir / "ckpt" / "ep0-ba2-rank0.pt")) << err.str();
  const std::string sharded =
      "parallelism_config: {fsdp: {state_dict_type: sharded}}\nsave_interval: 1ba\n"
      "save_folder: " +
      (dir / "sharded").string() + "\n";
  EXPECT_EQ(train(config("h.yaml", synthetic(sharded))), 0) << err.str();
  EXPECT_TRUE(fs::exists(dir / "sharded" / "ep0-ba2" / ".metadata")) << err.str();
  EXPECT_TRUE(fs::exists(dir / "sharded" / "ep0-ba2" / "__0_0.distcp")) << err.str();
  EXPECT_EQ(train(config("i.yaml", synthetic("parallelism_config: {fsdp: {state_dict_type: local}}\n"))), 2);
  EXPECT_NE(err.str().find("parallelism_config.fsdp.state_dict_type must be 'full' or 'sharded', got 'local'"),
            std::string::npos)
      << err.str();
}

TEST_F(CliTest, MissingFilesAndBadYaml) {
  EXPECT_EQ(train((dir / "nope.yaml").string()), 2);
  EXPECT_NE(err.str().find("nope.yaml' cannot be opened"), std::string::npos) << err.str();
  EXPECT_EQ(train(config("bad.yaml", "model: [unclosed\n")), 2);
  EXPECT_NE(err.str().find("is not valid YAML"), std::string::npos) << err.str();
  EXPECT_EQ(train(config("nodata.yaml", synthetic()), {"train_data={dataset: mnist, path: /nonexistent}"}), 2);
  EXPECT_NE(err.str().find("train_data.path"), std::string::npos) << err.str();
  EXPECT_EQ(train(config("o.yaml", synthetic()), {"novalue"}), 2);
  EXPECT_NE(err.str().find("expected key.path=value"), std::string::npos) << err.str();
}

// Inputs that used to pass or to end in stoll/stoul: each names the key or file and what was expected.
TEST_F(CliTest, OverflowsDirectoriesQuotesAndShapesAreClearErrors) {
  const std::string cfg = config("s.yaml", synthetic());
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases{
      {{"max_duration=99999999999999999999ba"}, "max_duration: Invalid time string '99999999999999999999ba'"},
      {{"schedulers=[{name: constant}]", "schedulers.99999999999999999999.name=x"},
       "index 99999999999999999999 is past the end"},
      {{"train_data.batch_size=99999999999999999999"},
       "train_data.batch_size: expected an integer within the int64 range"},
      {{"model.in_features=784"}, "model.in_features: 784, but the data gives 1x8x8 images = 64 features"},
      {{"model={name: mnist_cnn}"}, "model.name: mnist_cnn takes 28x28 images"},
      {{"run_name=\"unterminated"}, "override 'run_name=\"unterminated': value is not valid YAML"}};
  for (const auto& [overrides, needle] : cases) {
    EXPECT_EQ(train(cfg, overrides), 2) << needle;
    EXPECT_NE(err.str().find(needle), std::string::npos) << err.str();
    EXPECT_EQ(err.str().find("stoul"), std::string::npos) << err.str();
    EXPECT_EQ(err.str().find("stoll"), std::string::npos) << err.str();
  }
  EXPECT_EQ(train(dir.string()), 2);
  EXPECT_NE(err.str().find("config file '" + dir.string() + "' is a directory"), std::string::npos) << err.str();
  EXPECT_EQ(train(config("quote.yaml", "model: {name: \"mlp}\n")), 2);
  EXPECT_NE(err.str().find("config file '" + (dir / "quote.yaml").string() + "' is not valid YAML"), std::string::npos)
      << err.str();
}

// A zip that is not a torch.save archive: LibTorch's reader refuses it with "[enforce fail at ...]" and a frame list;
// the user sees the file and the reason on one line.
TEST_F(CliTest, LibTorchInternalsDoNotReachTheUser) {
  COMPOSER_REQUIRE_PYTHON("zipfile");
  const std::string zip = (dir / "foreign.pt").string();
  const auto py = testing::run_python(
      {"-c", "import zipfile,sys; z=zipfile.ZipFile(sys.argv[1],'w'); z.writestr('x','y'); z.close()", zip});
  ASSERT_EQ(py.status, 0) << py.output;
  const std::string cfg =
      config("e.yaml", synthetic("eval_data: {dataset: synthetic_images, split: test, channels: 1, size: 8, "
                                 "num_samples: 64, batch_size: 64}\n"));
  std::ostringstream eout, eerr;
  EXPECT_EQ(eval_command(cfg, {"load_path=" + zip}, eout, eerr), 1);
  EXPECT_NE(eerr.str().find(zip), std::string::npos) << eerr.str();
  for (const char* internal : {"Exception raised from", "frame #", "enforce fail", "inline_container"}) {
    EXPECT_EQ(eerr.str().find(internal), std::string::npos) << eerr.str();
  }
  const std::string message = eerr.str();
  EXPECT_LE(std::count(message.begin(), message.end(), '\n'), 2) << message;
}

// A run whose loss became NaN is not a success: the summary says so and the exit status is 3.
TEST_F(CliTest, ADivergedRunExitsWithStatusThree) {
  EXPECT_EQ(train(config("nan.yaml", synthetic()), {"optimizer={name: sgd, lr: 1e30}", "max_duration=6ba"}), 3);
  EXPECT_NE(err.str().find("diverged: the training loss was not finite from batch"), std::string::npos) << err.str();
  // decoupled_sgdw with lr 0 and a weight decay: Composer's decay factor keeps the weights finite.
  EXPECT_EQ(train(config("lr0.yaml", synthetic()), {"optimizer={name: decoupled_sgdw, lr: 0, weight_decay: 0.01}"}), 0)
      << err.str();
}

// The same config and seed give bitwise the same weights: the CLI seeds before it builds the model.
TEST_F(CliTest, TwoRunsOfOneConfigAreBitwiseIdentical) {
  auto run = [&](const std::string& name) {
    const std::string cfg =
        config(name + ".yaml", "seed: 5\nrun_name: " + name + "\nsave_folder: " + (dir / name).string() +
                                   "\nsave_interval: 2ba\nmodel: {name: mnist_cnn, width: 8}\n"
                                   "train_data: {dataset: synthetic_images, channels: 1, size: 28, "
                                   "num_samples: 128, batch_size: 32, num_workers: 2}\n"
                                   "max_duration: 2ba\nprogress_bar: false\n");
    EXPECT_EQ(train(cfg), 0) << err.str();
    return read_checkpoint((dir / name / "ep0-ba2-rank0.pt").string())
        .toGenericDict()
        .at("state")
        .toGenericDict()
        .at("model")
        .toGenericDict();
  };
  const Dict a = run("first"), b = run("second");
  ASSERT_EQ(a.size(), b.size());
  for (const auto& e : a)
    EXPECT_TRUE(at::equal(e.value().toTensor(), b.at(e.key()).toTensor())) << e.key().toStringRef();
}

TEST_F(CliTest, TrainsSavesAndEvaluatesWithOverrides) {
  const std::string cfg = config(
      "ok.yaml",
      synthetic(
          "eval_data: {dataset: synthetic_images, split: test, channels: 1, size: 8, num_samples: 64, batch_size: 64}\n"
          "run_name: cli-run\nloggers: [{name: file, filename: '" +
          (dir / "{run_name}" / "log.jsonl").string() +
          "'}]\n"
          "save_folder: " +
          (dir / "{run_name}").string() + "\nsave_interval: 3ba\n"));
  ASSERT_EQ(train(cfg, {"max_duration=6ba", "optimizer.lr=0.05"}), 0) << err.str();
  EXPECT_NE(out.str().find("trained run 'cli-run' to 6ba"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("metrics/eval/Accuracy"), std::string::npos) << out.str();
  const fs::path state = dir / "cli-run" / "ep1-ba6-rank0.pt";
  EXPECT_TRUE(fs::exists(dir / "cli-run" / "ep0-ba3-rank0.pt"));
  EXPECT_TRUE(fs::is_symlink(dir / "cli-run" / "latest-rank0.pt"));
  ASSERT_TRUE(fs::exists(state));
  ASSERT_TRUE(fs::exists(dir / "cli-run" / "log.jsonl"));
  std::ostringstream eout, eerr;
  ASSERT_EQ(eval_command(cfg, {"load_path=" + state.string(), "loggers=[]"}, eout, eerr), 0) << eerr.str();
  EXPECT_NE(eout.str().find("(trained 6 batches)"), std::string::npos) << eout.str();
  // A corrupt state file is an error naming the file.
  std::ofstream(dir / "bad.pt") << "not a checkpoint";
  std::ostringstream bout, berr;
  EXPECT_EQ(eval_command(cfg, {"load_path=" + (dir / "bad.pt").string(), "loggers=[]"}, bout, berr), 1);
  EXPECT_NE(berr.str().find("bad.pt"), std::string::npos) << berr.str();
}

TEST_F(CliTest, InspectAndExportSafetensors) {
  const std::string cfg = config("x.yaml", synthetic("run_name: inspect-me\nsave_folder: '" + dir.string() + "'\n"));
  ASSERT_EQ(train(cfg), 0) << err.str();
  const std::string ckpt = (dir / "ep0-ba2-rank0.pt").string();
  std::ostringstream o, e;
  ASSERT_EQ(inspect_command(ckpt, o, e), 0) << e.str();
  EXPECT_NE(o.str().find("run_name: inspect-me"), std::string::npos) << o.str();
  EXPECT_NE(o.str().find("batch=2"), std::string::npos) << o.str();
  EXPECT_NE(o.str().find("module.1.weight"), std::string::npos) << o.str();
  EXPECT_NE(o.str().find("[16, 64]"), std::string::npos) << o.str();
  EXPECT_NE(o.str().find("optimizers: DecoupledSGDW"), std::string::npos) << o.str();
  EXPECT_NE(o.str().find("  schedulers: []\n"), std::string::npos) << o.str();  // metadata lists print as lists
  std::ostringstream xo, xe;
  const std::string st = (dir / "w.safetensors").string();
  ASSERT_EQ(export_command(ckpt, "safetensors", st, "", xo, xe), 0) << xe.str();
  const auto tensors = read_safetensors(st);
  ASSERT_EQ(tensors.size(), 4u);
  const Dict model = read_checkpoint(ckpt).toGenericDict().at("state").toGenericDict().at("model").toGenericDict();
  for (const auto& [name, t] : tensors) EXPECT_TRUE(torch::equal(t, model.at(name).toTensor())) << name;
  // The header is 8-byte aligned JSON with dtype, shape and data_offsets, as the format requires.
  std::ifstream raw(st, std::ios::binary);
  uint64_t n = 0;
  raw.read(reinterpret_cast<char*>(&n), 8);
  EXPECT_EQ((8 + n) % 8, 0u);
  std::string header(n, ' ');
  raw.read(header.data(), static_cast<std::streamsize>(n));
  const auto j = nlohmann::json::parse(header);
  EXPECT_EQ(j["module.1.weight"]["dtype"], "F32");
  EXPECT_EQ(j["module.1.weight"]["shape"], nlohmann::json({16, 64}));
  EXPECT_EQ(j["__metadata__"]["format"], "pt");
  std::ostringstream bo, be;
  EXPECT_EQ(export_command(ckpt, "onnx", "", "", bo, be), 2);
  EXPECT_NE(be.str().find("unknown format 'onnx'"), std::string::npos);
  EXPECT_EQ(inspect_command((dir / "nope.pt").string(), bo, be), 1);
  EXPECT_NE(be.str().find("nope.pt"), std::string::npos);
}

TEST_F(CliTest, TrainsWithAlgorithmsFromYaml) {
  const std::string cfg = config("algos.yaml",
                                 "model: {name: mnist_cnn, in_channels: 1, width: 16}\n"
                                 "train_data: {dataset: synthetic_images, channels: 1, size: 28, num_samples: 128, "
                                 "batch_size: 32, num_workers: 0}\n"
                                 "max_duration: 2ba\nprogress_bar: false\n"
                                 "algorithms:\n"
                                 "  - {name: BlurPool, min_channels: 1}\n"
                                 "  - {name: channels_last}\n"
                                 "  - {name: label_smoothing, smoothing: 0.2}\n"
                                 "  - {name: cutout, length: 0.25}\n"
                                 "  - {name: mixup, alpha: 0.3}\n"
                                 "save_folder: " +
                                     (dir / "algos").string() + "\nsave_interval: 2ba\n");
  ASSERT_EQ(train(cfg), 0) << err.str();
  std::ostringstream iout, ierr;
  ASSERT_EQ(inspect_command((dir / "algos" / "ep0-ba2-rank0.pt").string(), iout, ierr), 0) << ierr.str();
  EXPECT_NE(iout.str().find("BlurPool(replace_convs=True, replace_maxpools=True, blur_first=True, min_channels=1)"),
            std::string::npos)
      << iout.str();
  EXPECT_NE(iout.str().find("LabelSmoothing(smoothing=0.2"), std::string::npos) << iout.str();
}

// The profiler section: Composer's Profiler arguments, the schedule and the trace handlers from the registry.
TEST_F(CliTest, ProfilerSectionWritesTracesAndNamesBadKeys) {
  const std::string traces = (dir / "traces").string(), torch = (dir / "torch").string();
  const std::string cfg = config("prof.yaml", synthetic("profiler:\n  schedule: {warmup: 0, active: 2}\n"
                                                        "  trace_handlers: [{name: json, folder: " +
                                                        traces + "}]\n  torch_prof_folder: " + torch + "\n"));
  ASSERT_EQ(train(cfg), 0) << err.str();
  EXPECT_TRUE(fs::exists(dir / "traces" / "ep0-ba2-rank0.json"));
  EXPECT_TRUE(fs::exists(dir / "torch" / "rank0.2.pt.trace.json"));
  EXPECT_EQ(train(config("bad.yaml", synthetic("profiler: {schedule: {active: 0}}\n"))), 2);
  EXPECT_NE(err.str().find("profiler schedule active: must be >= 1"), std::string::npos) << err.str();
  EXPECT_EQ(train(config("bad2.yaml", synthetic("profiler: {trace_handlers: [{name: chrome}]}\n"))), 2);
  EXPECT_NE(err.str().find("unknown trace handler 'chrome'; registered: json"), std::string::npos) << err.str();
}

// save_folder and a RemoteUploaderDownloader logger in YAML, against a real S3 server; a bad bucket URI is a config
// error naming the key.
TEST_F(CliTest, SavesToS3AndUploadsLogsFromYaml) {
  COMPOSER_REQUIRE_PYTHON("moto boto3");
  testing::MotoServer server(dir / "moto", {"runs"});
  const std::string log = (dir / "log.jsonl").string();
  const std::string cfg =
      config("s3.yaml", synthetic("run_name: yaml-s3\nsave_folder: s3://runs/{run_name}/ckpt\nsave_interval: 1ba\n"
                                  "loggers:\n  - {name: file, filename: " +
                                  log +
                                  ", remote_file_name: '{run_name}/log.jsonl'}\n"
                                  "  - {name: remote_uploader_downloader, bucket_uri: s3://runs}\n"));
  ASSERT_EQ(train(cfg), 0) << err.str();
  const auto keys = server.list("runs", "yaml-s3/");
  for (const char* k : {"yaml-s3/ckpt/ep0-ba1-rank0.pt", "yaml-s3/ckpt/ep0-ba2-rank0.pt",
                        "yaml-s3/ckpt/latest-rank0.pt.symlink", "yaml-s3/log.jsonl"})
    EXPECT_NE(std::find(keys.begin(), keys.end(), k), keys.end()) << k << " in " << nlohmann::json(keys).dump();
  EXPECT_EQ(train(config("bad.yaml", synthetic("loggers: [{name: remote_uploader_downloader, bucket_uri: runs}]\n"))),
            2);
  EXPECT_NE(err.str().find("bucket_uri = 'runs': expected an object-store URI"), std::string::npos) << err.str();
  EXPECT_EQ(train(config("bad2.yaml", synthetic("save_folder: gs://runs/x\n"))), 2);
  EXPECT_NE(err.str().find("save_folder 'gs://runs/x': unknown object store 'gs://'"), std::string::npos) << err.str();
  // One slash: a mistyped URI, not the local folder ./s3:/x.
  EXPECT_EQ(train(config("bad3.yaml", synthetic("save_folder: 's3:/runs/x'\n"))), 2);
  EXPECT_NE(err.str().find("save_folder 's3:/runs/x' looks like a mistyped object-store URI; expected s3://"),
            std::string::npos)
      << err.str();
  EXPECT_FALSE(fs::exists("s3:"));
}

// loggers: [{name: mlflow}] in YAML against a real MLflow server with authentication on: without credentials the run
// stops at INIT naming the refusal and the variables; with MLflow's user name and password, and with a token, it
// trains and MLflow's own client (given the same credentials) reads each run's two losses back.
TEST_F(CliTest, LogsToAnAuthenticatedMlflowServerFromYaml) {
  COMPOSER_REQUIRE_PYTHON("mlflow flask_wtf");
  testing::MlflowServer server(dir / "mlflow", /*authenticated=*/true);
  const std::string read = testing::source_dir() + "/tests/trainer/mlflow_read.py";
  const auto ready = testing::run_python({read, "wait", server.url()});
  ASSERT_EQ(ready.status, 0) << ready.output << testing::read_text((dir / "mlflow" / "server.log").string());
  const auto cfg = [&](const std::string& run) {
    return config(run + ".yaml", synthetic("run_name: " + run + "\nloggers: [{name: mlflow, tracking_uri: '" +
                                           server.url() + "', experiment_name: yaml-auth, flush_interval: 0}]\n"));
  };
  for (const char* v : {"MLFLOW_TRACKING_TOKEN", "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"}) ::unsetenv(v);
  EXPECT_NE(train(cfg("anonymous")), 0);
  EXPECT_NE(err.str().find("answered HTTP 401"), std::string::npos) << err.str();
  EXPECT_NE(err.str().find("MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD, or MLFLOW_TRACKING_TOKEN"),
            std::string::npos)
      << err.str();
  const auto read_losses = [&](const std::string& run) {
    const auto py = testing::run_python({read, "read", server.url(), "yaml-auth", run, (dir / "download").string()});
    EXPECT_EQ(py.status, 0) << py.output;
    const size_t line = py.output.rfind("\n{\"experiment_id\"");
    const auto r = nlohmann::json::parse(py.output.substr(line == std::string::npos ? 0 : line + 1), nullptr, false);
    return r.is_object() && r["runs"].size() == 1 ? r["runs"][0]["metrics"]["loss/train/total"].size() : size_t{0};
  };
  {
    testing::ScopedEnv env;
    env.set("MLFLOW_TRACKING_USERNAME", "admin");
    env.set("MLFLOW_TRACKING_PASSWORD", testing::MlflowServer::admin_password());
    ASSERT_EQ(train(cfg("basic")), 0) << err.str();
    EXPECT_EQ(read_losses("basic"), 2u);
  }
  {
    testing::ScopedEnv env;
    env.set("MLFLOW_TRACKING_TOKEN", testing::MlflowServer::token());
    ASSERT_EQ(train(cfg("token")), 0) << err.str();
    EXPECT_EQ(read_losses("token"), 2u);
  }
}

// dataset: streaming in YAML, on Fashion-MNIST shards written by streaming.MDSWriter.
TEST_F(CliTest, TrainsOnStreamingShardsFromYaml) {
  COMPOSER_REQUIRE_PYTHON("streaming PIL");
  COMPOSER_REQUIRE_DATA(testing::data_path("fashion-mnist/train-images-idx3-ubyte.gz"));
  const auto w =
      testing::run_python({testing::source_dir() + "/tests/data/mds_write.py", "fashion", (dir / "mds").string(),
                           testing::data_path("fashion-mnist/train-images-idx3-ubyte.gz"),
                           testing::data_path("fashion-mnist/train-labels-idx1-ubyte.gz"), "256"});
  ASSERT_EQ(w.status, 0) << w.output;
  const std::string cfg = config("mds.yaml",
                                 "model: {name: mlp, in_features: 784, hidden: [32]}\n"
                                 "train_data: {dataset: streaming, local: " +
                                     (dir / "mds").string() +
                                     ", batch_size: 32, num_classes: 10, num_workers: 1, validate_hash: sha1,"
                                     " normalize: {mean: [0.286], std: [0.353]}}\n"
                                     "max_duration: 1ep\nprogress_bar: false\nrun_name: mds\n");
  ASSERT_EQ(train(cfg), 0) << err.str();
  EXPECT_NE(out.str().find("trained run 'mds' to 1ep"), std::string::npos) << out.str();
  EXPECT_EQ(train(config("bad.yaml",
                         "model: {name: mlp, in_features: 784, hidden: [32]}\n"
                         "train_data: {dataset: streaming, local: " +
                             (dir / "none").string() +
                             "}\n"
                             "max_duration: 1ba\n")),
            2);
  EXPECT_NE(err.str().find("no index at"), std::string::npos) << err.str();

  // convert: our Fashion-MNIST as MDS (zstd), read back by MosaicML Streaming and by StreamingDataset.
  const std::string fm =
      config("fm.yaml",
             "train_data: {dataset: fashion_mnist, path: " + testing::data_path("fashion-mnist") + ", limit: 300}\n");
  std::ostringstream cout_, cerr_;
  ASSERT_EQ(convert_command(fm, (dir / "conv").string(), "train", "zstd:5", cout_, cerr_), 0) << cerr_.str();
  EXPECT_NE(cout_.str().find("wrote 300 samples"), std::string::npos) << cout_.str();
  const auto py = testing::run_python(
      {testing::source_dir() + "/tests/data/mds_write.py", "read", (dir / "conv").string(), "0", "299"});
  ASSERT_EQ(py.status, 0) << py.output;
  auto ours = load_mnist(testing::data_path("fashion-mnist"), true, 300);
  const Batch b = ours->get_batch(at::tensor({0, 299}, at::kLong));
  const auto rows = nlohmann::json::parse(
      py.output.substr(py.output.rfind("\n{") == std::string::npos ? 0 : py.output.rfind("\n{") + 1));
  const auto keys = b.keys();
  EXPECT_EQ(rows["299"][keys[1]].get<int64_t>(), b.at(keys[1])[1].item<int64_t>());
  StreamingDataset back(StreamingDatasetOptions().local((dir / "conv").string()).validate_hash("sha1"));
  EXPECT_EQ(back.size(), 300);
  const Batch c = back.get_batch(at::tensor({0, 299}, at::kLong));
  for (const auto& k : keys) EXPECT_TRUE(at::equal(c.at(k), b.at(k))) << k;
  EXPECT_EQ(convert_command(fm, (dir / "conv").string(), "train", "", cout_, cerr_), 1);  // refuses to overwrite
  EXPECT_NE(cerr_.str().find("already holds an index.json"), std::string::npos) << cerr_.str();
}

TEST_F(CliTest, ListShowsRegistries) {
  std::ostringstream o, e;
  ASSERT_EQ(list_command("schedulers", o, e), 0);
  EXPECT_NE(o.str().find("cosine_annealing_with_warmup"), std::string::npos);
  std::ostringstream o2, e2;
  ASSERT_EQ(list_command("models", o2, e2), 0);
  EXPECT_NE(o2.str().find("mnist_cnn"), std::string::npos);
  std::ostringstream oa, ea;
  ASSERT_EQ(list_command("algorithms", oa, ea), 0);
  for (const char* name : {"augmix", "blurpool", "channels_last", "colout", "cutmix", "cutout", "factorize",
                           "ghost_batchnorm", "label_smoothing", "mixup", "progressive_resizing", "randaugment",
                           "squeeze_excite", "stochastic_depth", "weight_standardization"}) {
    EXPECT_NE(oa.str().find(name), std::string::npos) << name;
  }
  EXPECT_NE(oa.str().find("BlurPool: anti-aliased"), std::string::npos) << oa.str();
  // Each algorithm's hyperparameters and defaults come from its options' field list.
  EXPECT_NE(
      oa.str().find("MixUp: convex combinations of samples and labels (alpha=0.2, interpolate_loss=False, input_key=0, "
                    "target_key=1)"),
      std::string::npos)
      << oa.str();
  std::ostringstream ol, el;
  ASSERT_EQ(list_command("loggers", ol, el), 0);
  for (const char* name : {"console", "file", "remote_uploader_downloader", "mlflow", "tensorboard"})
    EXPECT_NE(ol.str().find(name), std::string::npos) << name << " in " << ol.str();
  std::ostringstream o3, e3;
  EXPECT_EQ(list_command("widgets", o3, e3), 1);
  EXPECT_NE(e3.str().find("unknown kind 'widgets'"), std::string::npos);
}

// End to end on real data (labelled slow): the demo CNN trained 2 epochs on an 8,000-image Fashion-MNIST slice
// reaches >= 80% on 2,000 test images (chance is 10%; the full demo reaches >= 90%). Runs gave 82.7-86.2%: the CLI
// builds the model before it seeds (issue 12), so the initialisation differs from run to run.
TEST_F(CliTest, FashionMnistSliceLearns) {
  COMPOSER_REQUIRE_DATA(testing::data_path("fashion-mnist/train-images-idx3-ubyte.gz"));
  const std::string cfg = testing::source_dir() + "/examples/configs/fashion_cnn.yaml";
  ASSERT_EQ(train(cfg, {"train_data.path=" + testing::data_path("fashion-mnist"),
                        "eval_data.path=" + testing::data_path("fashion-mnist"), "train_data.limit=8000",
                        "eval_data.limit=2000", "max_duration=2ep", "loggers=[]", "save_overwrite=false",
                        "schedulers=[{name: cosine_annealing_with_warmup, t_warmup: 10ba}]",
                        "save_folder=", "progress_bar=false"}),
            0)
      << err.str();
  const auto pos = out.str().find("metrics/eval/Accuracy = ");
  ASSERT_NE(pos, std::string::npos) << out.str();
  const double acc = std::stod(out.str().substr(pos + 24));
  EXPECT_GE(acc, 0.80) << out.str();
}

// End to end: a character-level GPT on Moby Dick pushes the training loss below 2.5 nats.
TEST_F(CliTest, MobyDickCharModelLossFallsBelowTwoPointFive) {
  COMPOSER_REQUIRE_DATA(testing::data_path("text/mobydick.txt"));
  const std::string cfg = testing::source_dir() + "/examples/configs/mobydick_gpt.yaml";
  const std::string log = (dir / "moby.jsonl").string();
  ASSERT_EQ(train(cfg, {"train_data.path=" + testing::data_path("text/mobydick.txt"), "train_data.text_limit=200000",
                        "eval_data.path=" + testing::data_path("text/mobydick.txt"), "eval_data.text_limit=200000",
                        "model.n_layer=2", "model.d_model=64", "model.max_seq_len=64", "train_data.seq_len=64",
                        "eval_data.seq_len=64", "max_duration=300ba", "eval_interval=300ba",
                        "save_folder=", "progress_bar=false", "loggers=[{name: file, filename: " + log + "}]",
                        // The model generates with its data's character tokenizer.
                        "callbacks=[{name: generate, prompts: [Call me, The whale], interval: 300ba, "
                        "max_new_tokens: 24}]"}),
            0)
      << err.str();
  std::ifstream in(log);
  std::vector<double> losses;
  nlohmann::json generations;
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j["type"] == "metrics" && j["data"].contains("loss/train/total"))
      losses.push_back(j["data"]["loss/train/total"]);
    if (j["type"] == "table" && j["name"] == "generations") generations = j;
  }
  ASSERT_FALSE(generations.is_null()) << "no generations table in " << log;
  EXPECT_EQ(generations["step"], 300);
  EXPECT_EQ(generations["columns"], nlohmann::json({"prompt", "generation"}));
  ASSERT_EQ(generations["data"].size(), 2u);
  EXPECT_EQ(generations["data"][1][0], "The whale");
  EXPECT_EQ(generations["data"][1][1].get<std::string>().size(), 24u);  // 24 characters
  ASSERT_EQ(losses.size(), 300u);
  double last = 0;
  for (size_t i = losses.size() - 20; i < losses.size(); ++i) last += losses[i] / 20;
  EXPECT_LT(last, 2.5) << out.str();
  EXPECT_GT(losses.front(), 3.5);  // started near ln(vocab)
}

// The pretrained path end to end, with the real SmolLM2-135M-Instruct (tools/fetch_data.sh smollm2): the example
// config fine-tunes it on Moby Dick in its own tokens and lowers the validation loss from the pretrained level (a run
// with lr 0 measures that level), `generate` continues a prompt, and `export --format hf` writes a model directory
// that loads back with the fine-tuned weights.
// A BERT masked LM from a Hugging Face directory (hf_masked_lm) trains from YAML and exports back to a BERT
// directory with the trained weights and the pretrained directory's tokenizer files (WordPiece: copied, not read).
TEST_F(CliTest, HfMaskedLmTrainsAndExportsWithItsTokenizerFiles) {
  const fs::path bert_dir = dir / "bert";
  models::BertMLM bert(models::TransformerConfig().vocab_size(40).max_seq_len(16).n_layer(2).n_head(2).d_model(16));
  models::save_bert_hf(bert, bert_dir.string());
  std::ofstream(bert_dir / "vocab.txt") << "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\n";
  std::ofstream(bert_dir / "tokenizer_config.json") << R"({"tokenizer_class": "BertTokenizer", "do_lower_case": true})";
  const std::string cfg =
      config("bert.yaml", "model: {name: hf_masked_lm, pretrained: " + bert_dir.string() +
                              "}\n"
                              "train_data: {dataset: synthetic_tokens, vocab_size: 40, seq_len: 16, num_samples: 16, "
                              "batch_size: 4}\n"
                              "optimizer: {name: decoupled_adamw, lr: 0.01}\n"
                              "max_duration: 2ba\nprogress_bar: false\nloggers: []\nsave_folder: " +
                              (dir / "bert_ckpt").string() + "\n");
  ASSERT_EQ(train(cfg), 0) << err.str();
  const std::string ckpt = (dir / "bert_ckpt" / "latest-rank0.pt").string();
  const fs::path hf = dir / "bert_hf";
  ASSERT_EQ(export_command(ckpt, "hf", hf.string(), cfg, out, err), 0) << err.str();
  EXPECT_NE(out.str().find("AutoModelForMaskedLM"), std::string::npos) << out.str();
  EXPECT_EQ(testing::read_text((hf / "vocab.txt").string()), testing::read_text((bert_dir / "vocab.txt").string()));
  EXPECT_TRUE(fs::exists(hf / "tokenizer_config.json"));
  const auto saved = read_checkpoint(ckpt).toGenericDict().at("state").toGenericDict().at("model").toGenericDict();
  auto exported = models::load_bert_hf(hf.string());
  int64_t moved = 0;
  for (const auto& p : exported->named_parameters()) {
    const at::Tensor trained = saved.at("model." + p.key()).toTensor();
    EXPECT_TRUE(at::equal(p.value(), trained)) << p.key();
    moved += !at::equal(trained, bert.named_parameters()[p.key()]);
  }
  EXPECT_GT(moved, 0);  // it trained
}

TEST_F(CliTest, SmolLM2FineTunesGeneratesAndExports) {
  const std::string gguf = testing::data_path("smollm2/SmolLM2-135M-Instruct.Q4_1.gguf");
  COMPOSER_REQUIRE_DATA(gguf);
  COMPOSER_REQUIRE_DATA(testing::data_path("text/mobydick.txt"));
  // The example config, its data/ paths made absolute (tests run in the build tree).
  std::string yaml = testing::read_text(testing::source_dir() + "/examples/configs/smollm2_finetune.yaml");
  for (size_t at = 0; (at = yaml.find(" data/", at)) != std::string::npos; at += 6)
    yaml.replace(at + 1, 4, testing::source_dir() + "/data");
  const std::string cfg = config("smollm2.yaml", yaml);
  const std::vector<std::string> common{"train_data.text_limit=60000",
                                        "eval_data.text_limit=60000",
                                        "train_data.seq_len=64",
                                        "eval_data.seq_len=64",
                                        "train_data.batch_size=4",
                                        "eval_data.batch_size=8",
                                        "eval_subset_num_batches=2",
                                        "schedulers=[]",
                                        "callbacks=[]",
                                        "loggers=[]",
                                        "progress_bar=false"};
  const auto eval_loss = [&] {
    const auto pos = out.str().find("metrics/eval/LanguageCrossEntropy = ");
    EXPECT_NE(pos, std::string::npos) << out.str();
    return pos == std::string::npos ? 0.0 : std::stod(out.str().substr(pos + 36));
  };
  auto overrides = common;
  for (const char* o : {"optimizer.lr=0", "max_duration=1ba", "eval_interval=1ba", "save_folder=", "save_interval="})
    overrides.push_back(o);
  ASSERT_EQ(train(cfg, overrides), 0) << err.str();
  const double pretrained = eval_loss();
  overrides = common;
  for (const std::string& o : std::vector<std::string>{"optimizer.lr=1e-4", "max_duration=6ba", "eval_interval=6ba",
                                                       "save_folder=" + (dir / "ckpt").string(), "save_interval=6ba"})
    overrides.push_back(o);
  ASSERT_EQ(train(cfg, overrides), 0) << err.str();
  const double tuned = eval_loss();
  std::cout << "SmolLM2 on Moby Dick: validation loss " << pretrained << " pretrained, " << tuned
            << " after 6 batches\n";
  EXPECT_GT(pretrained, 2.0);  // a real model on real text: well below ln(49152) = 10.8, well above zero
  EXPECT_LT(pretrained, 6.0);
  EXPECT_LT(tuned, pretrained - 0.05);

  std::ostringstream gen_out, gen_err;
  GenerateArgs args;
  args.prompt = "The capital of France is";
  args.max_new_tokens = 6;
  ASSERT_EQ(generate_command(cfg, {}, args, gen_out, gen_err), 0) << gen_err.str();
  EXPECT_EQ(gen_out.str().rfind(args.prompt, 0), 0u) << gen_out.str();
  EXPECT_NE(gen_out.str().find("Paris"), std::string::npos) << gen_out.str();

  const std::string ckpt = (dir / "ckpt" / "latest-rank0.pt").string();
  const std::string hf = (dir / "hf").string();
  ASSERT_EQ(export_command(ckpt, "hf", hf, cfg, out, err), 0) << err.str();
  auto exported = models::load_llama_hf(hf);
  const auto saved = read_checkpoint(ckpt).toGenericDict().at("state").toGenericDict().at("model").toGenericDict();
  for (const char* name : {"model.layers.29.mlp.down_proj.weight", "model.embed_tokens.weight"}) {
    EXPECT_TRUE(at::equal(exported->named_parameters()[name], saved.at(std::string("model.") + name).toTensor()))
        << name;
  }
  EXPECT_TRUE(fs::exists(dir / "hf" / "tokenizer.json"));  // the model's tokenizer beside its weights
  EXPECT_EQ(BpeTokenizer::from_tokenizer_json((dir / "hf" / "tokenizer.json").string())->encode("Call me Ishmael."),
            BpeTokenizer::from_gguf(gguf)->encode("Call me Ishmael."));
  EXPECT_EQ(export_command(ckpt, "hf", hf, "", out, err), 2);
  EXPECT_NE(err.str().find("--config: required with --format hf"), std::string::npos) << err.str();

  // LoRA on prompt/response pairs (each Moby Dick line answered by the next): only the adapters train, the export
  // writes PEFT adapters and the merged model.
  const std::string jsonl = (dir / "pairs.jsonl").string();
  {
    std::ifstream book(testing::data_path("text/mobydick.txt"));
    std::ofstream pairs(jsonl);
    std::string previous, line;
    for (int n = 0; n < 400 && std::getline(book, line);) {
      if (line.size() < 20) continue;
      if (!previous.empty() && n++ >= 0)
        pairs << nlohmann::json({{"prompt", previous}, {"response", line}}).dump() << "\n";
      previous = line;
    }
  }
  const std::string pair_data = "{dataset: jsonl_tokens, path: " + jsonl + ", tokenizer: " + gguf +
                                ", format: prompt_response, seq_len: 48, batch_size: 4";
  std::string lora_yaml = yaml;
  lora_yaml.insert(lora_yaml.find("\n", lora_yaml.find("  pretrained:")) + 1, "  lora: {r: 4, lora_alpha: 8}\n");
  const std::string lora_cfg = config("smollm2_lora.yaml", lora_yaml);
  ASSERT_EQ(train(lora_cfg, {"train_data=" + pair_data + "}", "eval_data=" + pair_data + ", split: test}",
                             "optimizer.lr=1e-3", "max_duration=3ba", "eval_interval=3ba", "eval_subset_num_batches=1",
                             "schedulers=[]", "callbacks=[]", "loggers=[]", "progress_bar=false",
                             "save_folder=" + (dir / "lora").string(), "save_interval=3ba"}),
            0)
      << err.str();
  const std::string lora_ckpt = (dir / "lora" / "latest-rank0.pt").string();
  const auto lora_saved =
      read_checkpoint(lora_ckpt).toGenericDict().at("state").toGenericDict().at("model").toGenericDict();
  const auto base = models::load_llama_gguf(gguf);
  EXPECT_TRUE(at::equal(lora_saved.at("model.model.layers.3.self_attn.q_proj.weight").toTensor(),
                        base->named_parameters()["model.layers.3.self_attn.q_proj.weight"]));  // frozen
  EXPECT_GT(lora_saved.at("model.model.layers.3.self_attn.q_proj.lora_B.weight").toTensor().abs().max().item<double>(),
            0.0);  // trained from zeros
  const std::string lora_hf = (dir / "lora_hf").string();
  EXPECT_EQ(export_command(lora_ckpt, "hf", lora_hf, cfg, out, err), 2);  // a config without the run's lora
  EXPECT_NE(err.str().find("model.layers.0.self_attn.q_proj.lora_A.weight"), std::string::npos) << err.str();
  ASSERT_EQ(export_command(lora_ckpt, "hf", lora_hf, lora_cfg, out, err), 0) << err.str();
  EXPECT_TRUE(fs::exists(dir / "lora_hf" / "adapter" / "adapter_config.json"));
  EXPECT_FALSE(models::has_lora(*models::load_llama_hf(lora_hf)));

  // convert: the prompt/response pairs as MDS hold the samples jsonl_tokens makes (labels -100 on the prompt), and
  // the model trains from them as `dataset: streaming`.
  const std::string mds = (dir / "pairs_mds").string();
  std::ostringstream cout_, cerr_;
  ASSERT_EQ(convert_command(config("pairs.yaml", "train_data: " + pair_data + "}\n"), mds, "train", "", cout_, cerr_),
            0)
      << cerr_.str();
  const auto tokenizer = BpeTokenizer::from_gguf(gguf);
  std::vector<PromptResponse> pairs;
  {
    std::ifstream in(jsonl);
    std::string line;
    for (int i = 0; i < 2 && std::getline(in, line); ++i) {
      const auto j = nlohmann::json::parse(line);
      pairs.push_back(
          {tokenizer->encode(j["prompt"].get<std::string>()), tokenizer->encode(j["response"].get<std::string>())});
    }
  }
  const auto direct = make_prompt_response_dataset(pairs, 48, *tokenizer->eos_token(), *tokenizer->eos_token());
  StreamingDataset back(StreamingDatasetOptions().local(mds));
  EXPECT_NE(cout_.str().find("wrote " + std::to_string(back.size()) + " samples"), std::string::npos) << cout_.str();
  EXPECT_GT(back.size(), 300);  // 90% of the pairs (the train split)
  const Batch got = back.get_batch(at::arange(2)), want = direct->get_batch(at::arange(2));
  for (const char* key : {"input_ids", "labels"}) EXPECT_TRUE(at::equal(got.at(key), want.at(key))) << key;
  EXPECT_EQ(got.at("labels")[0][0].item<int64_t>(), -100);
  const std::string streamed = "{dataset: streaming, local: " + mds + ", batch_size: 4}";
  ASSERT_EQ(train(lora_cfg,
                  {"train_data=" + streamed, "eval_data=" + streamed, "max_duration=1ba", "eval_interval=1ba",
                   "eval_subset_num_batches=1", "schedulers=[]", "callbacks=[]", "loggers=[]", "progress_bar=false"}),
            0)
      << err.str();
}

}  // namespace
}  // namespace composer::cli
