// Text data: a character-level corpus and tokenizer, language-modelling windows, and (included here) the GPT-2
// tokenizer.
#pragma once

#include "composer/data/dataset.h"
#include "composer/data/gpt2_tokenizer.h"
#include "composer/data/tokenizer.h"

#include <array>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace composer {

/// A Project Gutenberg text as plain text: the UTF-8 BOM removed, CRLF turned into LF, and only the body between
/// the "*** START OF" and "*** END OF" lines kept (the whole text when there are no such lines).
/// Throws std::runtime_error naming the file when it cannot be read or is empty.
std::string load_gutenberg_text(const std::string& path);

/// Maps each distinct byte of a text to an id (sorted by byte value).
class CharTokenizer : public Tokenizer {
 public:
  explicit CharTokenizer(const std::string& text);
  int64_t vocab_size() const override { return static_cast<int64_t>(chars_.size()); }
  /// Throws std::invalid_argument naming the first character outside the vocabulary.
  std::vector<int64_t> encode(const std::string& text) const override;
  std::string decode(const std::vector<int64_t>& ids) const override;

 private:
  std::string chars_;
  std::array<int64_t, 256> ids_;
};

/// Non-overlapping windows for next-token prediction: "input_ids" [N, L] = tokens[i*L, i*L+L) and "labels"
/// [N, L] = the same window shifted by one. Requires at least seq_len + 1 tokens.
std::shared_ptr<TensorDataset> make_lm_dataset(const at::Tensor& tokens, int64_t seq_len);

}  // namespace composer
