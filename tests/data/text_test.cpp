#include "support/data_paths.h"
#include "support/test_support.h"

#include <gtest/gtest.h>

#include <fstream>

namespace composer {
namespace {

namespace fs = std::filesystem;

Gpt2Tokenizer gpt2() { return Gpt2Tokenizer::from_tiktoken(testing::data_path("gpt2/gpt2.tiktoken")); }

// A ranks file with `text`, written by the test.
std::string ranks_file(const std::string& name, const std::string& text) {
  const fs::path p = fs::temp_directory_path() / ("composer_ranks_" + std::to_string(::getpid()) + "_" + name);
  std::ofstream(p) << text;
  return p.string();
}

TEST(Gpt2TokenizerTest, GoldenIds) {
  COMPOSER_REQUIRE_DATA(testing::data_path("gpt2/gpt2.tiktoken"));
  const auto tok = gpt2();
  EXPECT_EQ(tok.vocab_size(), 50257);
  EXPECT_EQ(tok.eot_token(), 50256);
  EXPECT_EQ(tok.encode("Hello world"), (std::vector<int64_t>{15496, 995}));
  EXPECT_EQ(tok.encode(" the"), (std::vector<int64_t>{262}));
  EXPECT_EQ(tok.encode("Hello, world!"), (std::vector<int64_t>{15496, 11, 995, 0}));
}

TEST(Gpt2TokenizerTest, RoundTripsText) {
  COMPOSER_REQUIRE_DATA(testing::data_path("gpt2/gpt2.tiktoken"));
  const auto tok = gpt2();
  const std::string text =
      "Call me Ishmael.  Some years ago--never mind how long precisely--\nhaving little or no money, it's 1851!\t";
  EXPECT_EQ(tok.decode(tok.encode(text)), text);
}

TEST(Gpt2TokenizerTest, FromDirFindsTheRanksFile) {
  COMPOSER_REQUIRE_DATA(testing::data_path("gpt2/gpt2.tiktoken"));
  EXPECT_EQ(Gpt2Tokenizer::from_dir(testing::data_path("gpt2")).encode("Hello world"),
            (std::vector<int64_t>{15496, 995}));
  try {
    Gpt2Tokenizer::from_dir("/nonexistent/gpt2");
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/gpt2/gpt2.tiktoken"), std::string::npos) << e.what();
  }
}

TEST(Gpt2TokenizerTest, MalformedRanksNameFileAndLine) {
  const std::string not_base64 = ranks_file("b64", "IQ== 0\n!!!! 1\n");
  const std::string out_of_order = ranks_file("order", "IQ== 0\nIg== 5\n");
  const std::string too_few = ranks_file("few", "IQ== 0\nIg== 1\n");
  const auto message = [](const std::string& path) {
    try {
      Gpt2Tokenizer::from_tiktoken(path);
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(not_base64).find(not_base64 + "' line 2: the token is not base64"), std::string::npos)
      << message(not_base64);
  EXPECT_NE(message(out_of_order).find("line 2: rank 5 out of order (expected 1)"), std::string::npos)
      << message(out_of_order);
  EXPECT_NE(message(too_few).find("has 2 tokens"), std::string::npos) << message(too_few);
  for (const auto& p : {not_base64, out_of_order, too_few}) fs::remove(p);
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
  std::ofstream(p, std::ios::binary)
      << "\xEF\xBB\xBFheader\r\n*** START OF THE BOOK ***\r\nCall me\r\nIshmael.\r\n*** END OF THE BOOK ***\r\nlicense";
  EXPECT_EQ(load_gutenberg_text(p.string()), "Call me\nIshmael.\n");
  fs::remove(p);
  EXPECT_THROW(load_gutenberg_text("/nonexistent.txt"), std::runtime_error);
}

// A binary file given as a corpus is an error that names it and says where it stops being text.
TEST(TextTest, BinaryGarbageAndNulBytesAreNotText) {
  const fs::path p = fs::temp_directory_path() / ("composer_binary_" + std::to_string(::getpid()) + ".txt");
  const std::vector<std::pair<std::string, std::string>> cases{
      {std::string("Call me Ishmael.\0\0\0", 19), "a NUL byte at offset 16"},
      {std::string("caf\xC3\xA9 ok, then \xFF\xFE garbage"), "invalid byte 0xff at offset 15"},
      {std::string("ok \xF8\x80\x80 no"),
       "invalid byte 0xf8 at offset 3"},  // F5-FF never lead, even before continuations
      {std::string(200, '\x01') + "words", "control characters"}};
  for (const auto& [bytes, needle] : cases) {
    std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
    try {
      load_gutenberg_text(p.string());
      ADD_FAILURE() << "accepted: " << needle;
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(p.string()), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  }
  std::ofstream(p, std::ios::binary | std::ios::trunc)
      << "caf\xC3\xA9 \xE2\x80\x94 na\xC3\xAFve\ttabs\n";  // UTF-8 is text
  EXPECT_NO_THROW(load_gutenberg_text(p.string()));
  fs::remove(p);
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
