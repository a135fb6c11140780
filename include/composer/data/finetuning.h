// Fine-tuning data in a pretrained model's tokens: JSON-lines files of documents ({"text": ...}, concatenated and
// packed into windows, as llm-foundry's text data) or of prompt/response pairs ({"prompt": ..., "response": ...}, one
// sample each, the loss masked on the prompt with -100 as llm-foundry and Composer's HuggingFaceModel expect).
#pragma once

#include "composer/data/dataset.h"
#include "composer/data/tokenizer.h"

#include <memory>
#include <string>
#include <vector>

namespace composer {

/// The string `key` of every record of a JSON-lines file (blank lines skipped). Throws std::runtime_error naming the
/// file and line when one is not a JSON object with that string.
std::vector<std::string> read_jsonl_field(const std::string& path, const std::string& key);

struct PromptResponse {
  std::vector<int64_t> prompt, response;
};

/// One sample per pair: "input_ids" [N, seq_len] = (prompt, response, eos)[0 : L-1] padded with pad_id, "labels"
/// [N, seq_len] = the next token where it is part of the response (or the final eos), else -100. Longer pairs keep
/// their first seq_len + 1 tokens. Throws std::invalid_argument when a pair has an empty response or none is given.
std::shared_ptr<TensorDataset> make_prompt_response_dataset(const std::vector<PromptResponse>& pairs, int64_t seq_len,
                                                            int64_t eos_id, int64_t pad_id);

}  // namespace composer
