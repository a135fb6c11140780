// Hugging Face transformers as the peer for models::Llama, both ways, on real files:
//   transformers -> us: small random Llama, Qwen2 and GQA models written by save_pretrained load into models::Llama
//     and give transformers' logits and greedy tokens; SmolLM2-135M-Instruct's GGUF (tools/fetch_data.sh smollm2)
//     gives the logits and greedy continuation transformers computes from the same file.
//   us -> transformers: save_llama_hf's directories load in AutoModelForCausalLM.from_pretrained with our logits.
//   BERT both ways: BertForMaskedLM and BertForPreTraining directories load into models::BertMLM with transformers'
//     masked-LM logits, and save_bert_hf's load in AutoModelForMaskedLM with ours.
// Tolerances: both sides dequantize the GGUF blocks to the same float32 values and run the same ATen kernels, so on
// this machine SmolLM2's logits come out bit-identical (the test prints the difference); 1e-4 (logits of magnitude
// ~20 after 30 layers) leaves room for another thread count's reduction order. The random models agree to 1e-5, the
// greedy tokens exactly.
#include "support/errors.h"
#include "support/python.h"

#include "composer/formats/safetensors.h"
#include "composer/models/generation.h"
#include "composer/models/gguf_model.h"
#include "composer/models/hf_bert.h"
#include "composer/models/hf_gpt2.h"
#include "composer/models/hf_model.h"
#include "composer/models/lora.h"
#include "composer/models/registry.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>

namespace composer {
namespace {

namespace fs = std::filesystem;

std::map<std::string, at::Tensor> read_map(const std::string& path) {
  std::map<std::string, at::Tensor> out;
  for (auto& [name, t] : read_safetensors(path)) out[name] = t;
  return out;
}

at::Tensor greedy(nn::Layer& model, const at::Tensor& ids, int64_t n) {
  return models::generate_tokens(model, ids, models::GenerationOptions().max_new_tokens(n));
}

struct LlamaPeerTest : ::testing::Test {
  fs::path dir = fs::temp_directory_path() / ("composer_llama_peer_" + std::to_string(::getpid()));
  void SetUp() override { fs::create_directories(dir); }
  void TearDown() override { fs::remove_all(dir); }
  void python_lora(const std::vector<std::string>& args) {
    std::vector<std::string> argv{testing::peer_script("hf_lora.py")};
    argv.insert(argv.end(), args.begin(), args.end());
    const auto r = testing::run_python(argv);
    ASSERT_EQ(r.status, 0) << r.output;
  }
  void python(const std::vector<std::string>& args) {
    std::vector<std::string> argv{testing::peer_script("hf_llama.py")};
    argv.insert(argv.end(), args.begin(), args.end());
    const auto r = testing::run_python(argv);
    ASSERT_EQ(r.status, 0) << r.output;
  }
};

// Llama, Qwen2 and GPT-2 directories from transformers load with its logits and greedy tokens,
// and the directories we write load in transformers with ours; one Python run each way for all of them.
TEST_F(LlamaPeerTest, HuggingFaceDirectoriesLoadWithTheirLogitsAndOursLoadInTransformers) {
  COMPOSER_REQUIRE_PYTHON("torch transformers safetensors");
  python({"random", dir.string()});
  std::vector<std::string> logits_args{"logits"};
  std::map<std::string, at::Tensor> ours_logits;
  for (const std::string variant :
       {"gqa_tied", "llama3_bias", "linear_head_dim", "qwen2", "gpt2", "gpt2_gelu_inner", "bert", "bert_pretraining"}) {
    SCOPED_TRACE(variant);
    const fs::path hf = dir / variant;
    auto expected = read_map((hf / "expected.safetensors").string());
    const bool gpt2 = variant.rfind("gpt2", 0) == 0, bert = variant.rfind("bert", 0) == 0;
    ASSERT_EQ(models::hf_model_type(hf.string()), gpt2                 ? "gpt2"
                                                  : bert               ? "bert"
                                                  : variant == "qwen2" ? "qwen2"
                                                                       : "llama");
    std::shared_ptr<nn::Layer> model;
    if (gpt2) {
      model = models::load_gpt2_hf(hf.string());
    } else if (bert) {
      model = models::load_bert_hf(hf.string());
    } else {
      model = models::load_llama_hf(hf.string());
    }
    model->eval();
    at::NoGradGuard no_grad;
    const at::Tensor logits = model->forward(expected["input_ids"]);
    EXPECT_LT((logits - expected["logits"]).abs().max().item<double>(), 1e-5);
    if (!bert) {  // a masked LM does not generate
      EXPECT_TRUE(at::equal(greedy(*model, expected["input_ids"], 8), expected["generated"]));
    }

    const fs::path ours = dir / (variant + "_ours");
    const bool sharded = variant == "gqa_tied" || variant == "bert";
    const auto options = models::SavePretrainedOptions().max_shard_bytes(sharded ? 40000 : 1 << 30);
    if (gpt2) {
      models::save_gpt2_hf(dynamic_cast<models::GPT&>(*model), ours.string(), options);
    } else if (bert) {
      models::save_bert_hf(dynamic_cast<models::BertMLM&>(*model), ours.string(), options);
      auto back = models::load_bert_hf(ours.string());
      back->eval();
      EXPECT_TRUE(at::equal(back->forward(expected["input_ids"]), logits));  // written back exactly
    } else {
      models::save_llama_hf(dynamic_cast<models::Llama&>(*model), ours.string(), options);
    }
    logits_args.insert(logits_args.end(), {ours.string(), (hf / "expected.safetensors").string()});
    ours_logits[ours.string()] = logits;
  }
  python(logits_args);
  for (const auto& [ours, logits] : ours_logits) {
    const at::Tensor back = read_map((fs::path(ours) / "hf_logits.safetensors").string())["logits"];
    EXPECT_LT((back - logits).abs().max().item<double>(), 1e-5) << ours;
  }
  EXPECT_TRUE(fs::exists(dir / "gqa_tied_ours" / "model.safetensors.index.json"));  // written in shards
  EXPECT_TRUE(fs::exists(dir / "bert_ours" / "model.safetensors.index.json"));
}

// GPT-2 configs that models::GPT does not compute are refused naming the key.
TEST_F(LlamaPeerTest, Gpt2ConfigsItCannotComputeAreErrorsNamingTheKey) {
  const auto refused = [&](const std::string& extra) {
    const fs::path d = dir / "bad_gpt2";
    fs::create_directories(d);
    std::ofstream(d / "config.json") << "{\"model_type\": \"gpt2\", \"n_embd\": 8, \"n_head\": 2" << extra << "}";
    try {
      models::load_gpt2_hf(d.string());
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(refused(", \"activation_function\": \"relu\"").find("activation_function is 'relu'"), std::string::npos);
  EXPECT_NE(refused(", \"tie_word_embeddings\": false").find("tie_word_embeddings is false"), std::string::npos);
  EXPECT_NE(refused(", \"scale_attn_by_inverse_layer_idx\": true").find("scale_attn_by_inverse_layer_idx"),
            std::string::npos);
  EXPECT_NE(refused(", \"n_head\": 3").find("must be divisible by n_head"), std::string::npos);
  EXPECT_NE(refused("").find("has neither model.safetensors"), std::string::npos);
}

// BERT configs BertMLM does not compute, and weights that lack a tensor or hold one it has no place for, are errors
// naming the key or the tensor; a hf_masked_lm from YAML is that model.
TEST_F(LlamaPeerTest, BertDirectoriesItCannotTakeAreErrorsNamingTheKeyOrTensor) {
  const auto error_of = testing::any_error_of;
  const fs::path d = dir / "bad_bert";
  fs::create_directories(d);
  const auto refused = [&](const std::string& extra, const std::string& type = "bert") {
    std::ofstream(d / "config.json") << "{\"model_type\": \"" << type
                                     << "\", \"hidden_size\": 8, \"num_attention_heads\": 2" << extra << "}";
    return error_of([&] { models::load_bert_hf(d.string()); });
  };
  EXPECT_NE(refused(", \"hidden_act\": \"relu\"").find("hidden_act is 'relu'"), std::string::npos);
  EXPECT_NE(refused(", \"position_embedding_type\": \"relative_key\"").find("position_embedding_type"),
            std::string::npos);
  EXPECT_NE(refused(", \"layer_norm_eps\": 1e-5").find("layer_norm_eps is 1e-05"), std::string::npos);
  EXPECT_NE(refused(", \"is_decoder\": true").find("is_decoder"), std::string::npos);
  EXPECT_NE(refused("", "roberta").find("model_type is 'roberta', expected bert"), std::string::npos);

  const auto config = models::TransformerConfig().vocab_size(31).max_seq_len(8).n_layer(2).n_head(2).d_model(8);
  models::BertMLM bert(config);
  models::save_bert_hf(bert, d.string());
  auto tensors = read_safetensors((d / "model.safetensors").string());
  const auto without = [&](const std::string& drop, const std::string& add) {
    NamedTensors kept;
    for (const auto& [name, t] : tensors)
      if (name != drop) kept.emplace_back(name, t);
    if (!add.empty()) kept.emplace_back(add, at::zeros({2}));
    write_safetensors((d / "model.safetensors").string(), kept);
    return error_of([&] { models::load_bert_hf(d.string()); });
  };
  EXPECT_EQ(without("bert.encoder.layer.1.attention.self.key.bias", ""),
            "model directory '" + d.string() + "' lacks tensor 'bert.encoder.layer.1.attention.self.key.bias'");
  EXPECT_EQ(without("", "bert.encoder.layer.0.attention.self.rotary.weight"),
            "model directory '" + d.string() +
                "': tensor 'bert.encoder.layer.0.attention.self.rotary.weight' is not part of a BERT masked LM");
  without("", "bert.pooler.dense.bias");  // BertModel's pooler: skipped, as transformers skips it
  auto loaded =
      models::model_registry().make("hf_masked_lm", {{"pretrained", d.string()}}, "model", models::ModelInputs());
  const at::Tensor ids = at::randint(31, {2, 8}, at::kLong);
  bert.eval();
  loaded->eval();
  at::NoGradGuard no_grad;
  EXPECT_TRUE(at::equal(loaded->forward(Batch({{"input_ids", ids}, {"labels", ids}})), bert.forward(ids)));
  EXPECT_NE(error_of([&] {
              models::model_registry().make("hf_masked_lm", {}, "model", models::ModelInputs());
            }).find("model.pretrained"),
            std::string::npos);
}

// LoRA both ways with PEFT: our adapters (r 4 on q, v and down projections) load with peft.PeftModel.from_pretrained
// and give our logits, with the adapters and merged; adapters PEFT made (r 2 on k and o) load onto our model with its
// logits.
TEST_F(LlamaPeerTest, LoraAdaptersRoundTripWithPeft) {
  COMPOSER_REQUIRE_PYTHON("torch transformers peft safetensors");
  at::manual_seed(3);
  auto config = models::LlamaConfig()
                    .vocab_size(61)
                    .hidden_size(32)
                    .intermediate_size(48)
                    .num_hidden_layers(2)
                    .num_attention_heads(4)
                    .num_key_value_heads(2);
  models::Llama model(config);
  const std::string base = (dir / "base").string(), ids_file = (dir / "ids.safetensors").string();
  models::save_llama_hf(model, base);
  const at::Tensor ids = at::randint(61, {2, 9}, at::kLong);
  write_safetensors(ids_file, {{"input_ids", ids}});
  const auto options = models::LoraOptions().r(4).lora_alpha(16).target_modules({"q_proj", "v_proj", "down_proj"});
  const auto adapted = models::apply_lora(model, options);
  EXPECT_EQ(adapted.size(), 6u);
  EXPECT_EQ(adapted.front(), "model.layers.0.self_attn.q_proj");
  {
    at::NoGradGuard no_grad;
    for (auto& p : model.named_parameters()) {
      if (p.key().find("lora_B") != std::string::npos) p.value().normal_(0, 0.1);  // adapters that change the model
    }
  }
  int64_t trainable = 0;
  for (const auto& p : model.parameters()) trainable += p.requires_grad() ? p.numel() : 0;
  EXPECT_EQ(trainable, 2 * (4 * 32 + 32 * 4) + 2 * (4 * 32 + 16 * 4) + 2 * (4 * 48 + 32 * 4));  // only the adapters
  model.eval();
  at::NoGradGuard no_grad;
  const at::Tensor ours = model.forward(ids);
  models::save_lora_adapters(model, (dir / "adapters").string());
  python_lora({"apply", base, (dir / "adapters").string(), ids_file, (dir / "peft.safetensors").string()});
  auto peft = read_map((dir / "peft.safetensors").string());
  EXPECT_LT((peft["logits"] - ours).abs().max().item<double>(), 1e-5);
  EXPECT_GT((ours - models::load_llama_hf(base)->forward(ids)).abs().max().item<double>(), 1e-3);  // adapters matter
  EXPECT_EQ(models::merge_lora(model), 6);
  EXPECT_FALSE(models::has_lora(model));
  EXPECT_LT((model.forward(ids) - peft["merged"]).abs().max().item<double>(), 1e-5);

  python_lora({"make", base, (dir / "theirs").string(), ids_file, (dir / "theirs.safetensors").string()});
  auto fresh = models::load_llama_hf(base);
  const auto loaded = models::load_lora_adapters(*fresh, (dir / "theirs").string());
  EXPECT_EQ(loaded.r(), 2);
  fresh->eval();
  EXPECT_LT(
      (fresh->forward(ids) - read_map((dir / "theirs.safetensors").string())["logits"]).abs().max().item<double>(),
      1e-5);
}

TEST_F(LlamaPeerTest, SmolLM2FromGgufComputesWhatTransformersComputes) {
  const std::string gguf = testing::data_path("smollm2/SmolLM2-135M-Instruct.Q4_1.gguf");
  COMPOSER_REQUIRE_DATA(gguf);
  COMPOSER_REQUIRE_PYTHON("torch transformers gguf");
  python({"gguf", gguf, (dir / "smollm2.safetensors").string()});
  auto expected = read_map((dir / "smollm2.safetensors").string());
  auto model = models::load_llama_gguf(gguf);
  EXPECT_EQ(model->config().num_hidden_layers(), 30);
  EXPECT_EQ(model->config().kv_heads(), 3);
  EXPECT_TRUE(model->config().tie_word_embeddings());
  model->eval();
  at::NoGradGuard no_grad;
  for (int k = 0; k < 3; ++k) {
    SCOPED_TRACE(k);
    const at::Tensor ids = expected["ids_" + std::to_string(k)];
    const at::Tensor logits = model->forward(ids);
    std::cout << "SmolLM2 prompt " << k << ": max |logit difference| "
              << (logits - expected["logits_" + std::to_string(k)]).abs().max().item<double>() << "\n";
    EXPECT_LT((logits - expected["logits_" + std::to_string(k)]).abs().max().item<double>(), 1e-4);
    EXPECT_TRUE(at::equal(greedy(*model, ids, 16), expected["generated_" + std::to_string(k)]));
  }
}

}  // namespace
}  // namespace composer
