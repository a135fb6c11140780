// models::Llama on its own: the key-value cache gives the full forward's logits, the config refuses what it cannot
// build, the rotary unpermutation inverts llama.cpp's permutation, and the parameter names are Hugging Face's.
#include "composer/models/llama.h"
#include "composer/models/generation.h"
#include "composer/models/gguf_model.h"
#include "composer/models/hf_model.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace composer {
namespace {

models::LlamaConfig tiny() {
  return models::LlamaConfig()
      .vocab_size(50)
      .hidden_size(32)
      .intermediate_size(48)
      .num_hidden_layers(2)
      .num_attention_heads(4)
      .num_key_value_heads(2);
}

std::string error_of(const models::LlamaConfig& c) {
  try {
    c.validate();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(LlamaTest, ParameterNamesAreHuggingFaces) {
  models::Llama tied(tiny().tie_word_embeddings(true));
  auto names = tied.named_parameters().keys();
  EXPECT_EQ(names.front(), "model.embed_tokens.weight");
  EXPECT_NE(std::find(names.begin(), names.end(), "model.layers.1.self_attn.k_proj.weight"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "model.layers.0.post_attention_layernorm.weight"), names.end());
  EXPECT_EQ(std::find(names.begin(), names.end(), "lm_head.weight"), names.end());
  EXPECT_EQ(models::Llama(tiny()).named_parameters().keys().back(), "lm_head.weight");
  EXPECT_EQ(tied.named_parameters()["model.layers.0.self_attn.k_proj.weight"].sizes(), (at::IntArrayRef{16, 32}));
}

TEST(LlamaTest, CachedStepsEqualTheFullForward) {
  at::manual_seed(0);
  models::Llama model(
      tiny().rope_scaling(models::RopeScaling().rope_type("llama3").factor(4).original_max_position_embeddings(8)));
  model.eval();
  at::NoGradGuard no_grad;
  const at::Tensor ids = at::randint(50, {2, 11}, at::kLong);
  const at::Tensor full = model.forward(ids);
  models::KVCache cache;
  const at::Tensor first = model.forward_cached(ids.narrow(1, 0, 5), cache);   // a prompt
  const at::Tensor middle = model.forward_cached(ids.narrow(1, 5, 3), cache);  // several new tokens at once
  std::vector<at::Tensor> parts{first, middle};
  for (int64_t i = 8; i < 11; ++i) parts.push_back(model.forward_cached(ids.narrow(1, i, 1), cache));
  EXPECT_EQ(cache.length(), 11);
  EXPECT_LT((at::cat(parts, 1) - full).abs().max().item<double>(), 1e-5);
  // generate_tokens with the cache produces the tokens of the uncached argmax loop.
  const at::Tensor got =
      models::generate_tokens(model, ids.narrow(1, 0, 4), models::GenerationOptions().max_new_tokens(6));
  at::Tensor want = ids.narrow(1, 0, 4);
  for (int i = 0; i < 6; ++i) want = at::cat({want, model.forward(want).select(1, -1).argmax(-1, true)}, 1);
  EXPECT_TRUE(at::equal(got, want));
}

TEST(LlamaTest, BadConfigsAreErrorsNamingTheField) {
  EXPECT_NE(error_of(tiny().num_key_value_heads(3)).find("num_key_value_heads is 3, expected a divisor"),
            std::string::npos);
  EXPECT_NE(error_of(tiny().hidden_size(30)).find("LlamaConfig.hidden_size is 30"), std::string::npos);
  EXPECT_NE(error_of(tiny().rope_scaling(models::RopeScaling().rope_type("yarn"))).find("rope_scaling.rope_type"),
            std::string::npos);
  EXPECT_NE(error_of(tiny().vocab_size(0)).find("vocab_size is 0"), std::string::npos);
  EXPECT_TRUE(error_of(tiny()).empty());
}

TEST(LlamaTest, UnpermuteInvertsLlamaCppsPermutation) {
  // llama.cpp's convert_hf_to_gguf.py: w.reshape(n_head, 2, rows / n_head / 2, cols).swapaxes(1, 2).reshape(w.shape)
  const at::Tensor w = at::arange(8 * 3, at::kFloat).view({8, 3});
  const at::Tensor permuted = w.reshape({2, 2, 2, 3}).transpose(1, 2).reshape({8, 3});
  EXPECT_TRUE(at::equal(models::unpermute_rotary_rows(permuted, 2), w));
}

TEST(LlamaTest, HuggingFaceDirectoryErrorsNameTheFileAndTensor) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("composer_llama_hf_" + std::to_string(::getpid()));
  models::Llama model(tiny());
  models::save_llama_hf(model, dir.string());
  auto loaded = models::load_llama_hf(dir.string());
  EXPECT_TRUE(at::equal(loaded->named_parameters()["lm_head.weight"], model.named_parameters()["lm_head.weight"]));
  auto error = [&] {
    try {
      models::load_llama_hf(dir.string());
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  std::ofstream(dir / "config.json") << R"({"model_type": "gpt_neox", "hidden_size": 32})";
  EXPECT_NE(error().find("model_type is 'gpt_neox', expected llama, mistral or qwen2"), std::string::npos) << error();
  std::ofstream(dir / "config.json") << R"({"model_type": "llama", "vocab_size": 50, "hidden_size": 32,
      "intermediate_size": 48, "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2})";
  EXPECT_NE(error().find("lacks tensor 'model.layers.2.self_attn.q_proj.weight'"), std::string::npos) << error();
  fs::remove(dir / "model.safetensors");
  EXPECT_NE(error().find("has neither model.safetensors nor"), std::string::npos) << error();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace composer
