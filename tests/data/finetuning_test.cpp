// Fine-tuning data: prompt/response samples with the loss masked on the prompt (-100, llm-foundry's convention), and
// JSON-lines records with errors naming the file and line.
#include "composer/data/finetuning.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace composer {
namespace {

at::Tensor row(const TensorDataset& ds, const std::string& key, int64_t i) { return ds.data().at(key).select(0, i); }

TEST(PromptResponseTest, LabelsAreTheResponsesNextTokensAndThePromptIsMasked) {
  const auto ds = make_prompt_response_dataset({{{5, 6, 7}, {8, 9}}, {{4}, {3}}}, 6, /*eos_id=*/2, /*pad_id=*/0);
  ASSERT_EQ(ds->size(), 2);
  EXPECT_TRUE(at::equal(row(*ds, "input_ids", 0), at::tensor({5, 6, 7, 8, 9, 0}, at::kLong)));
  EXPECT_TRUE(at::equal(row(*ds, "labels", 0), at::tensor({-100, -100, 8, 9, 2, -100}, at::kLong)));
  EXPECT_TRUE(at::equal(row(*ds, "input_ids", 1), at::tensor({4, 3, 0, 0, 0, 0}, at::kLong)));
  EXPECT_TRUE(at::equal(row(*ds, "labels", 1), at::tensor({3, 2, -100, -100, -100, -100}, at::kLong)));
  // Too long: the first seq_len + 1 tokens.
  const auto cut = make_prompt_response_dataset({{{5, 6, 7}, {8, 9}}}, 3, 2, 0);
  EXPECT_TRUE(at::equal(row(*cut, "input_ids", 0), at::tensor({5, 6, 7}, at::kLong)));
  EXPECT_TRUE(at::equal(row(*cut, "labels", 0), at::tensor({-100, -100, 8}, at::kLong)));
  EXPECT_THROW(make_prompt_response_dataset({{{5}, {}}}, 4, 2, 0), std::invalid_argument);
  EXPECT_THROW(make_prompt_response_dataset({}, 4, 2, 0), std::invalid_argument);
}

TEST(JsonlTest, RecordsAndErrorsNameTheFileAndLine) {
  const auto path =
      (std::filesystem::temp_directory_path() / ("composer_jsonl_" + std::to_string(::getpid()))).string();
  std::ofstream(path) << "{\"text\": \"one\"}\n\n{\"text\": \"two\", \"x\": 1}\n";
  EXPECT_EQ(read_jsonl_field(path, "text"), (std::vector<std::string>{"one", "two"}));
  const auto error = [&](const std::string& key) {
    try {
      read_jsonl_field(path, key);
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error("prompt").find("line 1 has no string 'prompt'"), std::string::npos) << error("prompt");
  std::ofstream(path) << "{\"text\": \"one\"}\nnot json\n";
  EXPECT_NE(error("text").find("line 2 is not JSON"), std::string::npos) << error("text");
  std::filesystem::remove(path);
  EXPECT_NE(error("text").find("cannot be opened"), std::string::npos);
}

}  // namespace
}  // namespace composer
