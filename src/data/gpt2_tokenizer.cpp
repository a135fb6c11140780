#include "composer/data/gpt2_tokenizer.h"

#include "data/detail/byte_level.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <optional>
#include <set>
#include <stdexcept>

namespace composer {
namespace {

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

// GPT-2's options: its pattern, "<|endoftext|>" matched in text and ending generation.
BpeTokenizerOptions gpt2_options(std::vector<std::string> tokens,
                                 std::vector<std::pair<std::string, std::string>> merges, int64_t eot) {
  BpeTokenizerOptions o;
  o.tokens = std::move(tokens);
  o.merges = std::move(merges);
  o.special_ids = {eot};
  o.eos_id = eot;
  o.pre_tokenizer = PreTokenizer::Gpt2;
  return o;
}

}  // namespace

Gpt2Tokenizer Gpt2Tokenizer::from_files(const std::string& encoder_json, const std::string& vocab_bpe) {
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
  std::vector<std::string> tokens(j.size());
  for (auto it = j.begin(); it != j.end(); ++it) {
    const int64_t id = it.value().get<int64_t>();
    if (id < 0 || id >= static_cast<int64_t>(j.size())) {
      throw std::runtime_error("GPT-2 vocabulary '" + encoder_json + "' has id " + std::to_string(id) +
                               " out of range");
    }
    tokens[static_cast<size_t>(id)] = it.key();
  }
  std::ifstream vb(vocab_bpe);
  if (!vb)
    throw std::runtime_error("GPT-2 merges '" + vocab_bpe + "' cannot be opened (missing? run tools/fetch_data.sh)");
  std::vector<std::pair<std::string, std::string>> merges;
  std::string line;
  while (std::getline(vb, line)) {
    if (line.empty() || line.rfind("#version", 0) == 0) continue;
    const auto sp = line.find(' ');
    if (sp == std::string::npos)
      throw std::runtime_error("GPT-2 merges '" + vocab_bpe + "' has a malformed line: " + line);
    merges.emplace_back(line.substr(0, sp), line.substr(sp + 1));
  }
  if (merges.empty()) throw std::runtime_error("GPT-2 merges '" + vocab_bpe + "' has no merges");
  const auto eot = j.find("<|endoftext|>");
  if (eot == j.end()) throw std::runtime_error("GPT-2 vocabulary '" + encoder_json + "' has no <|endoftext|>");
  try {
    return Gpt2Tokenizer(gpt2_options(std::move(tokens), std::move(merges), eot->get<int64_t>()));
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error("GPT-2 vocabulary '" + encoder_json + "' and '" + vocab_bpe + "': " + e.what());
  }
}

namespace {

// The tokens of a tiktoken ranks file (raw bytes, by rank); errors name the file and line.
std::vector<std::string> read_ranks(const std::string& ranks_file) {
  std::ifstream in(ranks_file);
  if (!in)
    throw std::runtime_error("GPT-2 ranks '" + ranks_file + "' cannot be opened (missing? run tools/fetch_data.sh)");
  std::vector<std::string> tokens;
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
  return tokens;
}

}  // namespace

Gpt2Tokenizer Gpt2Tokenizer::from_tiktoken(const std::string& ranks_file) {
  const std::vector<std::string> raw = read_ranks(ranks_file);
  std::vector<std::string> tokens;
  std::vector<std::pair<std::string, std::string>> merges;
  detail::MergeRanks ranks;
  std::set<std::string> seen;
  for (size_t rank = 0; rank < raw.size(); ++rank) {
    tokens.push_back(detail::to_byte_level(raw[rank]));
    if (!seen.insert(tokens.back()).second) {
      throw std::runtime_error("GPT-2 ranks '" + ranks_file + "' lists a token twice (rank " + std::to_string(rank) +
                               ")");
    }
    if (raw[rank].size() < 2) continue;
    // The merge that forms this token: BPE with the merges of the lower ranks leaves exactly two parts.
    const auto parts = detail::merge_by_rank(detail::utf8_characters(tokens.back()), ranks);
    if (parts.size() != 2) {
      throw std::runtime_error("GPT-2 ranks '" + ranks_file + "': the token of rank " + std::to_string(rank) +
                               " is not one merge of lower-ranked tokens");
    }
    ranks[{parts[0], parts[1]}] = static_cast<int64_t>(merges.size());
    merges.emplace_back(parts[0], parts[1]);
  }
  for (int b = 0; b < 256; ++b) {
    if (!seen.count(detail::byte_characters()[static_cast<size_t>(b)]))
      throw std::runtime_error("GPT-2 ranks '" + ranks_file + "' lacks the single byte " + std::to_string(b));
  }
  tokens.push_back("<|endoftext|>");
  const auto eot = static_cast<int64_t>(tokens.size() - 1);
  return Gpt2Tokenizer(gpt2_options(std::move(tokens), std::move(merges), eot));
}

Gpt2Tokenizer Gpt2Tokenizer::from_dir(const std::string& dir) {
  const std::string ranks = dir + "/gpt2.tiktoken";
  if (std::ifstream(ranks)) return from_tiktoken(ranks);
  if (std::ifstream(dir + "/encoder.json")) return from_files(dir + "/encoder.json", dir + "/vocab.bpe");
  throw std::runtime_error("GPT-2 vocabulary: neither '" + ranks + "' nor '" + dir +
                           "/encoder.json' exists (run tools/fetch_data.sh gpt2)");
}

}  // namespace composer
