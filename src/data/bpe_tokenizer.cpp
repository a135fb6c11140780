#include "composer/data/bpe_tokenizer.h"

#include "data/detail/byte_level.h"
#include "data/detail/pre_tokenizer.h"

#include <algorithm>
#include <stdexcept>

namespace composer {

std::string pre_tokenizer_name(PreTokenizer pre) {
  switch (pre) {
    case PreTokenizer::Gpt2:
      return "gpt2";
    case PreTokenizer::Gpt2SplitDigits:
      return "smollm";
    case PreTokenizer::Llama3:
      return "llama3";
    case PreTokenizer::Qwen2:
      return "qwen2";
  }
  return "unknown";
}

BpeTokenizer::BpeTokenizer(BpeTokenizerOptions options) : options_(std::move(options)) {
  const auto& tokens = options_.tokens;
  if (tokens.empty()) throw std::invalid_argument("BpeTokenizer: the vocabulary is empty");
  for (size_t id = 0; id < tokens.size(); ++id) ids_.emplace(tokens[id], static_cast<int64_t>(id));
  const auto check_id = [&](int64_t id, const std::string& what) {
    if (id < 0 || id >= vocab_size())
      throw std::invalid_argument("BpeTokenizer: " + what + " " + std::to_string(id) +
                                  " is not a token id (vocabulary of " + std::to_string(vocab_size()) + ")");
  };
  for (size_t r = 0; r < options_.merges.size(); ++r) {
    const auto& [a, b] = options_.merges[r];
    if (!ids_.count(a) || !ids_.count(b) || !ids_.count(a + b)) {
      throw std::invalid_argument("BpeTokenizer: merge " + std::to_string(r) + " '" + a + " " + b +
                                  "' joins or makes a string that is not a token");
    }
    ranks_.emplace(options_.merges[r], static_cast<int64_t>(r));
  }
  for (int64_t id : options_.special_ids) {
    check_id(id, "special token");
    specials_.emplace_back(tokens[static_cast<size_t>(id)], id);
  }
  std::sort(specials_.begin(), specials_.end(),
            [](const auto& x, const auto& y) { return x.first.size() > y.first.size(); });
  if (options_.bos_id) check_id(*options_.bos_id, "bos_id");
  if (options_.eos_id) check_id(*options_.eos_id, "eos_id");
  if (options_.unk_id) check_id(*options_.unk_id, "unk_id");
  if (options_.add_bos && !options_.bos_id) throw std::invalid_argument("BpeTokenizer: add_bos without a bos_id");
  pattern_ = std::make_shared<detail::PreTokenizerPattern>(options_.pre_tokenizer);
}

std::optional<int64_t> BpeTokenizer::token_id(const std::string& token) const {
  const auto it = ids_.find(token);
  if (it == ids_.end()) return std::nullopt;
  return it->second;
}

void BpeTokenizer::encode_piece(const std::string& piece, std::vector<int64_t>& out) const {
  const std::string mapped = detail::to_byte_level(piece);
  if (options_.ignore_merges) {
    if (auto it = ids_.find(mapped); it != ids_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  const std::vector<std::string> parts = detail::merge_by_rank(detail::utf8_characters(mapped), ranks_);
  for (const auto& p : parts) {
    // Merge results are tokens (the constructor checks); a byte the vocabulary lacks is unk_id, or dropped without
    // one, as `tokenizers` does.
    const auto it = ids_.find(p);
    if (it != ids_.end()) {
      out.push_back(it->second);
    } else if (options_.unk_id) {
      out.push_back(*options_.unk_id);
    }
  }
}

void BpeTokenizer::encode_ordinary(const std::string& text, std::vector<int64_t>& out) const {
  const auto& pattern = *static_cast<const detail::PreTokenizerPattern*>(pattern_.get());
  for (const auto& piece : pattern.split(text)) encode_piece(std::string(piece), out);
}

std::vector<int64_t> BpeTokenizer::encode(const std::string& text) const {
  std::vector<int64_t> out;
  if (options_.add_bos) out.push_back(*options_.bos_id);
  size_t pos = 0;
  while (pos < text.size()) {
    // The next special token: the earliest occurrence, the longest at that position.
    size_t at = std::string::npos;
    const std::pair<std::string, int64_t>* found = nullptr;
    for (const auto& s : specials_) {
      const size_t p = text.find(s.first, pos);
      if (p < at) {
        at = p;
        found = &s;
      }
    }
    encode_ordinary(text.substr(pos, at == std::string::npos ? std::string::npos : at - pos), out);
    if (!found) break;
    out.push_back(found->second);
    pos = at + found->first.size();
  }
  return out;
}

std::string BpeTokenizer::decode(const std::vector<int64_t>& ids) const {
  std::string out;
  for (int64_t id : ids) {
    if (id < 0 || id >= vocab_size()) {
      throw std::invalid_argument("BpeTokenizer::decode: id " + std::to_string(id) + " is outside the vocabulary of " +
                                  std::to_string(vocab_size()));
    }
    for (const auto& ch : detail::utf8_characters(options_.tokens[static_cast<size_t>(id)])) {
      const auto byte = detail::character_byte(ch);
      out += byte ? std::string(1, static_cast<char>(*byte)) : ch;
    }
  }
  return out;
}

}  // namespace composer
