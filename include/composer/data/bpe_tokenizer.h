// Byte-level BPE tokenizers as Hugging Face's `tokenizers` runs them (GPT-2, Llama 3, SmolLM, Qwen2): special tokens
// are cut out of the text first, the rest is split by the pre-tokenizer's pattern (real Unicode classes, through
// PCRE2), each piece's bytes are mapped to GPT-2's printable characters and merged by rank. Built from a Hugging Face
// tokenizer.json or from a GGUF file's tokenizer.ggml.* metadata.
#pragma once

#include "composer/data/tokenizer.h"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace composer {

/// How text is split before the merges: Hugging Face's pre_tokenizer, llama.cpp's tokenizer.ggml.pre.
enum class PreTokenizer {
  Gpt2,             ///< GPT-2's pattern ('s|'t|...| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)
  Gpt2SplitDigits,  ///< every digit alone, then GPT-2's pattern (SmolLM, StarCoder: Digits(individual) + ByteLevel)
  Llama3,           ///< Llama 3's pattern (numbers in runs of up to three, case-insensitive contractions)
  Qwen2,            ///< Qwen2's: Llama 3's with single digits
};

/// "gpt2", "smollm", "llama3", "qwen2" (tokenizer.ggml.pre names).
std::string pre_tokenizer_name(PreTokenizer pre);

struct BpeTokenizerOptions {
  /// Token strings by id, in byte-level form (GPT-2's byte -> character table; "Ġ" is a space).
  std::vector<std::string> tokens;
  /// Merges by rank: the two parts of each.
  std::vector<std::pair<std::string, std::string>> merges;
  /// Ids of tokens matched verbatim in text before splitting (control tokens such as "<|im_start|>").
  std::vector<int64_t> special_ids;
  PreTokenizer pre_tokenizer = PreTokenizer::Gpt2;
  std::optional<int64_t> bos_id, eos_id;
  /// Stands for a byte that has no token; unset: such bytes are dropped, as `tokenizers` does without an unk_token
  /// (SmolLM2's vocabulary lacks some control characters).
  std::optional<int64_t> unk_id;
  /// encode() starts with bos_id (tokenizer.ggml.add_bos_token, a post-processor's template).
  bool add_bos = false;
  /// A piece that is a whole token stays one, without merges (tokenizer.json's ignore_merges, Llama 3).
  bool ignore_merges = false;
};

class BpeTokenizer : public Tokenizer {
 public:
  /// Throws std::invalid_argument naming what is wrong: a merge whose parts or result are not tokens, a token id out
  /// of range.
  explicit BpeTokenizer(BpeTokenizerOptions options);
  /// A Hugging Face tokenizer.json (model BPE with byte-level pre-tokenization). Throws std::runtime_error naming the
  /// file and the part it cannot take (another model type, a pre-tokenizer other than those above).
  static std::shared_ptr<BpeTokenizer> from_tokenizer_json(const std::string& path);
  /// The tokenizer inside a GGUF file (tokenizer.ggml.model "gpt2"). Throws std::runtime_error naming the file and
  /// the key (another tokenizer model, an unknown pre-tokenizer name).
  static std::shared_ptr<BpeTokenizer> from_gguf(const std::string& path);
  /// What transformers' AutoTokenizer.from_pretrained reads for a byte-level BPE model, from a path: a model directory
  /// (its tokenizer.json, with tokenizer_config.json beside it), a tokenizer.json file, or a .gguf file. Throws
  /// std::runtime_error naming the path where none of these is there, or the file and part it cannot take.
  static std::shared_ptr<BpeTokenizer> from_pretrained(const std::string& path);

  /// Writes `dir`/tokenizer.json (what from_tokenizer_json reads, and `tokenizers` and transformers'
  /// AutoTokenizer load with the same ids) and `dir`/tokenizer_config.json (BOS, EOS, add_bos_token).
  void save_pretrained(const std::string& dir) const;

  std::vector<int64_t> encode(const std::string& text) const override;
  std::string decode(const std::vector<int64_t>& ids) const override;
  int64_t vocab_size() const override { return static_cast<int64_t>(options_.tokens.size()); }
  std::optional<int64_t> eos_token() const override { return options_.eos_id; }
  std::optional<int64_t> bos_token() const { return options_.bos_id; }
  /// The id of `token` (byte-level form), if the vocabulary has it.
  std::optional<int64_t> token_id(const std::string& token) const;
  const BpeTokenizerOptions& options() const { return options_; }

 private:
  void encode_piece(const std::string& piece, std::vector<int64_t>& out) const;
  void encode_ordinary(const std::string& text, std::vector<int64_t>& out) const;
  BpeTokenizerOptions options_;
  std::unordered_map<std::string, int64_t> ids_;
  std::map<std::pair<std::string, std::string>, int64_t> ranks_;  // detail::MergeRanks
  std::vector<std::pair<std::string, int64_t>> specials_;         // text, id; longest first
  std::shared_ptr<const void> pattern_;  // the compiled pre-tokenizer (detail::PreTokenizerPattern)
};

}  // namespace composer
