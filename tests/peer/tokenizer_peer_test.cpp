// Hugging Face `tokenizers` as the peer for BpeTokenizer (tests/peer/hf_tokenizer.py builds its tokenizers from
// SmolLM2's GGUF vocabulary and merges): identical ids for every line of Moby Dick and a set of hard cases (unicode,
// emoji, runs of spaces and newlines, digits, special tokens inside text), from our reading of the same GGUF file and
// of the tokenizer.json files `tokenizers` saved; decoding gives the text back. GPT-2's, Llama 3's and Qwen2's
// pre-tokenizers are checked on the hard cases with the same vocabulary.
#include "support/python.h"

#include "composer/data/bpe_tokenizer.h"
#include "composer/formats/safetensors.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>

namespace composer {
namespace {

namespace fs = std::filesystem;

struct TokenizerPeerTest : ::testing::Test {
  fs::path dir = fs::temp_directory_path() / ("composer_tokenizer_peer_" + std::to_string(::getpid()));
  const std::string gguf = testing::data_path("smollm2/SmolLM2-135M-Instruct.Q4_1.gguf");
  void TearDown() override { fs::remove_all(dir); }

  // Every text of `variant` encodes to the ids `tokenizers` gave and decodes back; returns how many texts.
  static size_t compare(const BpeTokenizer& ours, const fs::path& variant) {
    const auto texts = nlohmann::json::parse(std::ifstream(variant / "texts.json")).get<std::vector<std::string>>();
    at::Tensor ids, offsets;
    for (auto& [name, t] : read_safetensors((variant / "ids.safetensors").string()))
      (name == "ids" ? ids : offsets) = t;
    const auto* all = ids.data_ptr<int64_t>();
    const auto* off = offsets.data_ptr<int64_t>();
    size_t mismatches = 0;
    for (size_t i = 0; i < texts.size(); ++i) {
      const std::vector<int64_t> want(all + off[i], all + off[i + 1]);
      const auto got = ours.encode(texts[i]);
      if (got != want && ++mismatches <= 5)
        ADD_FAILURE() << variant.filename() << " text " << i << ": '" << texts[i] << "'";
      EXPECT_EQ(ours.decode(got), texts[i]);
    }
    EXPECT_EQ(mismatches, 0u) << variant.filename();
    return texts.size();
  }
};

TEST_F(TokenizerPeerTest, SmolLM2TokenizerEncodesMobyDickAsTokenizersDoes) {
  COMPOSER_REQUIRE_DATA(gguf);
  const std::string text = testing::data_path("text/mobydick.txt");
  COMPOSER_REQUIRE_DATA(text);
  COMPOSER_REQUIRE_PYTHON("tokenizers gguf torch safetensors");
  const auto r = testing::run_python({testing::peer_script("hf_tokenizer.py"), gguf, text, dir.string()});
  ASSERT_EQ(r.status, 0) << r.output;

  const auto from_gguf = BpeTokenizer::from_gguf(gguf);
  EXPECT_EQ(from_gguf->vocab_size(), 49152);
  EXPECT_EQ(from_gguf->options().pre_tokenizer, PreTokenizer::Gpt2SplitDigits);
  EXPECT_EQ(from_gguf->eos_token(), 2);
  EXPECT_FALSE(from_gguf->options().add_bos);  // tokenizer.ggml.add_bos_token is false in this file
  const auto start = std::chrono::steady_clock::now();
  const size_t n = compare(*from_gguf, dir / "smollm");
  std::cout << "SmolLM2 tokenizer: " << n << " texts in "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() << " s\n";
  EXPECT_GT(n, 20000u);

  // Written back (save_pretrained): transformers' AutoTokenizer reads it with the same ids, and so do we.
  from_gguf->save_pretrained((dir / "saved").string());
  fs::copy_file(dir / "smollm" / "texts.json", dir / "saved" / "texts.json");
  const auto check =
      testing::run_python({testing::peer_script("hf_tokenizer.py"), "check", (dir / "saved").string(),
                           (dir / "saved" / "texts.json").string(), (dir / "saved" / "ids.safetensors").string()});
  ASSERT_EQ(check.status, 0) << check.output;
  compare(*from_gguf, dir / "saved");
  compare(*BpeTokenizer::from_pretrained((dir / "saved").string()), dir / "saved");  // the directory, as AutoTokenizer
  EXPECT_EQ(BpeTokenizer::from_pretrained(gguf)->options().merges, from_gguf->options().merges);

  const auto from_json = BpeTokenizer::from_tokenizer_json((dir / "smollm" / "tokenizer.json").string());
  EXPECT_EQ(from_json->eos_token(), 2);  // from tokenizer_config.json
  EXPECT_EQ(from_json->bos_token(), 1);
  for (const char* pre : {"gpt2", "llama3", "qwen2"}) {
    SCOPED_TRACE(pre);
    const auto tok = BpeTokenizer::from_tokenizer_json((dir / pre / "tokenizer.json").string());
    EXPECT_EQ(pre_tokenizer_name(tok->options().pre_tokenizer), pre);
    compare(*tok, dir / pre);
  }
}

TEST_F(TokenizerPeerTest, BadTokenizerFilesAreErrorsNamingThem) {
  fs::create_directories(dir);
  const auto error = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string json_path = (dir / "tokenizer.json").string();
  std::ofstream(json_path) << R"({"model": {"type": "Unigram", "vocab": []}})";
  EXPECT_NE(error([&] { BpeTokenizer::from_tokenizer_json(json_path); }).find("model.type is Unigram, expected BPE"),
            std::string::npos);
  std::ofstream(json_path) << "{not json";
  EXPECT_NE(error([&] { BpeTokenizer::from_tokenizer_json(json_path); }).find("is not valid JSON"), std::string::npos);
  EXPECT_NE(error([&] { BpeTokenizer::from_tokenizer_json((dir / "none.json").string()); }).find("cannot be opened"),
            std::string::npos);
  fs::create_directories(dir / "empty");
  EXPECT_EQ(error([&] { BpeTokenizer::from_pretrained((dir / "empty").string()); }),
            "tokenizer '" + (dir / "empty").string() + "': the directory has no tokenizer.json");
  EXPECT_EQ(
      error([&] { BpeTokenizer::from_pretrained((dir / "model.bin").string()); }),
      "tokenizer '" + (dir / "model.bin").string() + "': expected a model directory, a tokenizer.json or a .gguf file");
  BpeTokenizerOptions o;
  o.tokens = {"a", "b"};
  o.merges = {{"a", "b"}};
  EXPECT_NE(error([&] { BpeTokenizer t(o); }).find("merge 0 'a b' joins or makes a string that is not a token"),
            std::string::npos);
  if (fs::exists(gguf)) {
    const auto tok = BpeTokenizer::from_gguf(gguf);
    EXPECT_NE(error([&] { tok->decode({49152}); }).find("id 49152 is outside the vocabulary of 49152"),
              std::string::npos);
  }
}

}  // namespace
}  // namespace composer
