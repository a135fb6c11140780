#include "support/data_paths.h"
#include "support/test_support.h"

#include <gtest/gtest.h>

#include <fstream>

namespace composer {
namespace {

namespace fs = std::filesystem;

Gpt2Tokenizer gpt2() {
  return Gpt2Tokenizer::from_files(testing::data_path("gpt2/encoder.json"), testing::data_path("gpt2/vocab.bpe"));
}

TEST(Gpt2TokenizerTest, GoldenIds) {
  COMPOSER_REQUIRE_DATA(testing::data_path("gpt2/vocab.bpe"));
  const auto tok = gpt2();
  EXPECT_EQ(tok.vocab_size(), 50257);
  EXPECT_EQ(tok.eot_token(), 50256);
  EXPECT_EQ(tok.encode("Hello world"), (std::vector<int64_t>{15496, 995}));
  EXPECT_EQ(tok.encode(" the"), (std::vector<int64_t>{262}));
  EXPECT_EQ(tok.encode("Hello, world!"), (std::vector<int64_t>{15496, 11, 995, 0}));
}

TEST(Gpt2TokenizerTest, RoundTripsText) {
  COMPOSER_REQUIRE_DATA(testing::data_path("gpt2/vocab.bpe"));
  const auto tok = gpt2();
  const std::string text = "Call me Ishmael.  Some years ago--never mind how long precisely--\nhaving little or no money, it's 1851!\t";
  EXPECT_EQ(tok.decode(tok.encode(text)), text);
}

TEST(Gpt2TokenizerTest, MissingVocabularyNamesTheFile) {
  try {
    Gpt2Tokenizer::from_files("/nonexistent/encoder.json", "/nonexistent/vocab.bpe");
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/encoder.json"), std::string::npos);
  }
}

TEST(TextTest, GutenbergMarkersBomAndCrlf) {
  const fs::path p = fs::temp_directory_path() / ("composer_text_" + std::to_string(::getpid()) + ".txt");
  std::ofstream(p, std::ios::binary) << "\xEF\xBB\xBFheader\r\n*** START OF THE BOOK ***\r\nCall me\r\nIshmael.\r\n*** END OF THE BOOK ***\r\nlicense";
  EXPECT_EQ(load_gutenberg_text(p.string()), "Call me\nIshmael.\n");
  fs::remove(p);
  EXPECT_THROW(load_gutenberg_text("/nonexistent.txt"), std::runtime_error);
}

TEST(TextTest, CharTokenizerAndWindows) {
  CharTokenizer tok("hello");
  EXPECT_EQ(tok.vocab_size(), 4);  // e h l o
  EXPECT_EQ(tok.decode(tok.encode("hole")), "hole");
  EXPECT_THROW(tok.encode("z"), std::invalid_argument);
  auto ds = make_lm_dataset(at::arange(10), 3);
  EXPECT_EQ(ds->size(), 3);
  EXPECT_TRUE(ds->data().at(std::string("input_ids"))[1].equal(torch::tensor({3, 4, 5}, at::kLong)));
  EXPECT_TRUE(ds->data().at(std::string("labels"))[1].equal(torch::tensor({4, 5, 6}, at::kLong)));
  EXPECT_THROW(make_lm_dataset(at::arange(3), 3), std::invalid_argument);
}

TEST(RealData, MobyDickBody) {
  const std::string path = testing::data_path("text/mobydick.txt");
  COMPOSER_REQUIRE_DATA(path);
  const std::string text = load_gutenberg_text(path);
  EXPECT_EQ(text.find('\r'), std::string::npos);
  EXPECT_NE(text.find("Call me Ishmael."), std::string::npos);
  EXPECT_GT(text.size(), 1200000u);
  EXPECT_LE(CharTokenizer(text).vocab_size(), 90);
}

}  // namespace
}  // namespace composer
