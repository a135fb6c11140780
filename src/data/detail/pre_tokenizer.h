// The pre-tokenizers' split patterns, compiled once with PCRE2 (UTF-8, Unicode properties for \p{L}, \p{N}, \s),
// matched as Hugging Face's Split with behavior Isolated: each match is a piece, and so is unmatched text between.
#pragma once

#include "composer/data/bpe_tokenizer.h"

#include <string>
#include <string_view>
#include <vector>

namespace composer::detail {

/// The Split pattern of `kind` as tokenizer.json writes it (GPT-2's for Gpt2 and Gpt2SplitDigits).
std::string pre_tokenizer_pattern(PreTokenizer kind);

class PreTokenizerPattern {
 public:
  explicit PreTokenizerPattern(PreTokenizer kind);
  ~PreTokenizerPattern();
  PreTokenizerPattern(const PreTokenizerPattern&) = delete;
  PreTokenizerPattern& operator=(const PreTokenizerPattern&) = delete;
  /// The pieces of `text` in order; their concatenation is `text`.
  std::vector<std::string_view> split(std::string_view text) const;

 private:
  void split_with(const void* code, std::string_view text, std::vector<std::string_view>& out) const;
  void* digits_ = nullptr;  // pcre2_code*: each \p{N} alone, before the main pattern (Gpt2SplitDigits)
  void* main_ = nullptr;    // pcre2_code*
};

}  // namespace composer::detail
