#include "composer/data/text.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <stdexcept>

namespace composer {
namespace {

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

// Length of the UTF-8 sequence starting with byte b (1 for stray continuation bytes).
size_t utf8_len(unsigned char b) {
  return b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 1;
}

enum class CharClass { Letter, Number, Space, Other };

CharClass classify(const std::string& s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c >= 0x80) return CharClass::Letter;  // approximation: non-ASCII counts as a letter
  if (std::isalpha(c)) return CharClass::Letter;
  if (std::isdigit(c)) return CharClass::Number;
  if (std::isspace(c)) return CharClass::Space;
  return CharClass::Other;
}

// GPT-2's pattern: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
std::vector<std::string> pre_tokenize(const std::string& text) {
  std::vector<std::string> out;
  size_t i = 0;
  const size_t n = text.size();
  while (i < n) {
    bool matched = false;
    for (const char* c : {"'s", "'t", "'re", "'ve", "'m", "'ll", "'d"}) {
      const size_t len = std::strlen(c);
      if (text.compare(i, len, c) == 0) {
        out.push_back(text.substr(i, len));
        i += len;
        matched = true;
        break;
      }
    }
    if (matched) continue;
    size_t j = i;
    if (text[j] == ' ' && j + 1 < n && classify(text, j + 1) != CharClass::Space) ++j;
    const CharClass k = classify(text, j);
    if (k != CharClass::Space) {
      size_t e = j;
      while (e < n && classify(text, e) == k)
        e += (k == CharClass::Letter) ? utf8_len(static_cast<unsigned char>(text[e])) : 1;
      e = std::min(e, n);
      out.push_back(text.substr(i, e - i));
      i = e;
      continue;
    }
    size_t e = i;
    while (e < n && classify(text, e) == CharClass::Space) ++e;
    if (e < n && e - i >= 2) --e;  // \s+(?!\S): leave the last space to prefix the next word
    out.push_back(text.substr(i, e - i));
    i = e;
  }
  return out;
}

// Standard base64 (RFC 4648, with padding); nullopt for anything else.
std::optional<std::string> base64_decode(const std::string& in) {
  static const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  if (in.size() % 4 != 0) return std::nullopt;
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  size_t pad = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '=') {
      if (i + 2 < in.size()) return std::nullopt;
      ++pad;
      continue;
    }
    if (pad) return std::nullopt;
    const auto v = alphabet.find(in[i]);
    if (v == std::string::npos) return std::nullopt;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xFF);
    }
  }
  return out;
}

}  // namespace

Gpt2Tokenizer Gpt2Tokenizer::from_files(const std::string& encoder_json, const std::string& vocab_bpe) {
  Gpt2Tokenizer tok;
  std::ifstream ej(encoder_json);
  if (!ej)
    throw std::runtime_error("GPT-2 vocabulary '" + encoder_json +
                             "' cannot be opened (missing? run tools/fetch_data.sh)");
  nlohmann::json j;
  try {
    ej >> j;
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error("GPT-2 vocabulary '" + encoder_json + "' is not valid JSON: " + e.what());
  }
  if (!j.is_object() || j.empty())
    throw std::runtime_error("GPT-2 vocabulary '" + encoder_json + "' must be a JSON object of token -> id");
  tok.decoder_.resize(j.size());
  for (auto it = j.begin(); it != j.end(); ++it) {
    const int64_t id = it.value().get<int64_t>();
    if (id < 0 || id >= static_cast<int64_t>(j.size())) {
      throw std::runtime_error("GPT-2 vocabulary '" + encoder_json + "' has id " + std::to_string(id) +
                               " out of range");
    }
    tok.encoder_[it.key()] = id;
    tok.decoder_[static_cast<size_t>(id)] = it.key();
  }
  std::ifstream vb(vocab_bpe);
  if (!vb)
    throw std::runtime_error("GPT-2 merges '" + vocab_bpe + "' cannot be opened (missing? run tools/fetch_data.sh)");
  std::string line;
  int64_t rank = 0;
  while (std::getline(vb, line)) {
    if (line.empty() || line.rfind("#version", 0) == 0) continue;
    const auto sp = line.find(' ');
    if (sp == std::string::npos)
      throw std::runtime_error("GPT-2 merges '" + vocab_bpe + "' has a malformed line: " + line);
    tok.ranks_[{line.substr(0, sp), line.substr(sp + 1)}] = rank++;
  }
  if (rank == 0) throw std::runtime_error("GPT-2 merges '" + vocab_bpe + "' has no merges");
  tok.init_byte_table();
  return tok;
}

void Gpt2Tokenizer::init_byte_table() {
  // GPT-2's reversible byte -> printable character table.
  std::vector<int> printable;
  for (int b = '!'; b <= '~'; ++b) printable.push_back(b);
  for (int b = 0xA1; b <= 0xAC; ++b) printable.push_back(b);
  for (int b = 0xAE; b <= 0xFF; ++b) printable.push_back(b);
  int extra = 0;
  for (int b = 0; b < 256; ++b) {
    const bool direct = std::find(printable.begin(), printable.end(), b) != printable.end();
    byte_to_unicode_[static_cast<size_t>(b)] =
        utf8(direct ? static_cast<uint32_t>(b) : static_cast<uint32_t>(256 + extra++));
    unicode_to_byte_[byte_to_unicode_[static_cast<size_t>(b)]] = static_cast<unsigned char>(b);
  }
}

Gpt2Tokenizer Gpt2Tokenizer::from_tiktoken(const std::string& ranks_file) {
  std::ifstream in(ranks_file);
  if (!in)
    throw std::runtime_error("GPT-2 ranks '" + ranks_file + "' cannot be opened (missing? run tools/fetch_data.sh)");
  std::vector<std::string> tokens;  // raw bytes, by rank
  std::string line;
  int64_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty()) continue;
    const auto sp = line.find(' ');
    const auto bad = [&](const std::string& why) {
      return std::runtime_error("GPT-2 ranks '" + ranks_file + "' line " + std::to_string(line_no) + ": " + why);
    };
    if (sp == std::string::npos) throw bad("expected 'base64-token rank'");
    const std::optional<std::string> bytes = base64_decode(line.substr(0, sp));
    if (!bytes || bytes->empty()) throw bad("the token is not base64");
    const std::string rank_text = line.substr(sp + 1);
    if (rank_text.empty() || rank_text.size() > 9 || rank_text.find_first_not_of("0123456789") != std::string::npos) {
      throw bad("the rank '" + rank_text + "' is not a number below 10^9");
    }
    const auto rank = static_cast<size_t>(std::stoll(rank_text));
    if (rank != tokens.size())
      throw bad("rank " + rank_text + " out of order (expected " + std::to_string(tokens.size()) + ")");
    tokens.push_back(*bytes);
  }
  if (tokens.size() < 256)
    throw std::runtime_error("GPT-2 ranks '" + ranks_file + "' has " + std::to_string(tokens.size()) +
                             " tokens; a byte-level BPE needs at least the 256 bytes");
  Gpt2Tokenizer tok;
  tok.init_byte_table();
  tok.decoder_.reserve(tokens.size() + 1);
  for (size_t rank = 0; rank < tokens.size(); ++rank) {
    std::string piece;
    for (unsigned char b : tokens[rank]) piece += tok.byte_to_unicode_[b];
    if (!tok.encoder_.emplace(piece, static_cast<int64_t>(rank)).second) {
      throw std::runtime_error("GPT-2 ranks '" + ranks_file + "' lists a token twice (rank " + std::to_string(rank) +
                               ")");
    }
    tok.decoder_.push_back(piece);
    if (tokens[rank].size() < 2) continue;
    // The merge that forms this token: BPE with the merges of the lower ranks leaves exactly two parts.
    const std::vector<std::string> parts = tok.bpe(tokens[rank]);
    if (parts.size() != 2) {
      throw std::runtime_error("GPT-2 ranks '" + ranks_file + "': the token of rank " + std::to_string(rank) +
                               " is not one merge of lower-ranked tokens");
    }
    tok.ranks_[{parts[0], parts[1]}] = static_cast<int64_t>(rank);
  }
  for (int b = 0; b < 256; ++b) {
    if (!tok.encoder_.count(tok.byte_to_unicode_[static_cast<size_t>(b)])) {
      throw std::runtime_error("GPT-2 ranks '" + ranks_file + "' lacks the single byte " + std::to_string(b));
    }
  }
  tok.encoder_["<|endoftext|>"] = static_cast<int64_t>(tokens.size());
  tok.decoder_.push_back("<|endoftext|>");
  return tok;
}

Gpt2Tokenizer Gpt2Tokenizer::from_dir(const std::string& dir) {
  const std::string ranks = dir + "/gpt2.tiktoken";
  if (std::ifstream(ranks)) return from_tiktoken(ranks);
  if (std::ifstream(dir + "/encoder.json")) return from_files(dir + "/encoder.json", dir + "/vocab.bpe");
  throw std::runtime_error("GPT-2 vocabulary: neither '" + ranks + "' nor '" + dir +
                           "/encoder.json' exists (run tools/fetch_data.sh gpt2)");
}

std::vector<std::string> Gpt2Tokenizer::bpe(const std::string& word) const {
  std::vector<std::string> symbols;
  for (unsigned char b : word) symbols.push_back(byte_to_unicode_[b]);
  while (symbols.size() > 1) {
    int64_t best = std::numeric_limits<int64_t>::max();
    size_t at = 0;
    for (size_t i = 0; i + 1 < symbols.size(); ++i) {
      auto it = ranks_.find({symbols[i], symbols[i + 1]});
      if (it != ranks_.end() && it->second < best) {
        best = it->second;
        at = i;
      }
    }
    if (best == std::numeric_limits<int64_t>::max()) break;
    const std::string a = symbols[at], b = symbols[at + 1];
    std::vector<std::string> merged;
    for (size_t i = 0; i < symbols.size(); ++i) {
      if (i + 1 < symbols.size() && symbols[i] == a && symbols[i + 1] == b) {
        merged.push_back(a + b);
        ++i;
      } else {
        merged.push_back(symbols[i]);
      }
    }
    symbols.swap(merged);
  }
  return symbols;
}

std::vector<int64_t> Gpt2Tokenizer::encode(const std::string& text) const {
  std::vector<int64_t> ids;
  for (const std::string& word : pre_tokenize(text)) {
    for (const std::string& piece : bpe(word)) {
      auto it = encoder_.find(piece);
      if (it == encoder_.end())
        throw std::runtime_error("Gpt2Tokenizer: piece '" + piece + "' is not in the vocabulary");
      ids.push_back(it->second);
    }
  }
  return ids;
}

std::string Gpt2Tokenizer::decode(const std::vector<int64_t>& ids) const {
  std::string out;
  for (int64_t id : ids) {
    if (id < 0 || id >= vocab_size())
      throw std::invalid_argument("Gpt2Tokenizer: id " + std::to_string(id) + " out of range");
    const std::string& tok = decoder_[static_cast<size_t>(id)];
    for (size_t i = 0; i < tok.size();) {
      const size_t len = utf8_len(static_cast<unsigned char>(tok[i]));
      auto it = unicode_to_byte_.find(tok.substr(i, len));
      if (it == unicode_to_byte_.end())
        throw std::runtime_error("Gpt2Tokenizer: token " + std::to_string(id) + " is not byte-level");
      out += static_cast<char>(it->second);
      i += len;
    }
  }
  return out;
}

int64_t Gpt2Tokenizer::eot_token() const {
  auto it = encoder_.find("<|endoftext|>");
  if (it == encoder_.end()) throw std::runtime_error("Gpt2Tokenizer: the vocabulary has no <|endoftext|>");
  return it->second;
}

}  // namespace composer
