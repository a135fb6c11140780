#include "composer/data/text.h"

#include <ATen/ATen.h>

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace composer {
namespace {

// A text corpus is UTF-8 without NUL bytes and with few control characters; anything else is a binary file given
// by mistake, and the error says where it stops being text.
void require_text(const std::string& raw, const std::string& path) {
  size_t controls = 0;
  for (size_t i = 0; i < raw.size();) {
    const auto c = static_cast<unsigned char>(raw[i]);
    if (c == 0)
      throw std::runtime_error("text file '" + path + "' is not text: a NUL byte at offset " + std::to_string(i) +
                               " (a binary file?)");
    if (c < 0x80) {
      if (c < 0x20 && c != '\n' && c != '\r' && c != '\t' && c != '\f' && c != '\v') ++controls;
      ++i;
      continue;
    }
    // Lead bytes: C2-DF (2 bytes), E0-EF (3), F0-F4 (4); 80-C1 and F5-FF never start a character.
    const size_t len = c >= 0xF5 ? 0 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
    bool ok = len > 0 && i + len <= raw.size();
    for (size_t k = 1; ok && k < len; ++k) ok = (static_cast<unsigned char>(raw[i + k]) & 0xC0) == 0x80;
    if (!ok) {
      throw std::runtime_error("text file '" + path + "' is not UTF-8 text: invalid byte 0x" +
                               std::string(1, "0123456789abcdef"[c >> 4]) + std::string(1, "0123456789abcdef"[c & 15]) +
                               " at offset " + std::to_string(i));
    }
    i += len;
  }
  if (controls * 100 > raw.size()) {
    throw std::runtime_error("text file '" + path + "' is not text: " + std::to_string(controls) + " of its " +
                             std::to_string(raw.size()) + " bytes are control characters");
  }
}

}  // namespace

std::string load_gutenberg_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("text file '" + path + "' cannot be opened (missing? run tools/fetch_data.sh)");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string raw = ss.str();
  if (raw.rfind("\xEF\xBB\xBF", 0) == 0) raw.erase(0, 3);
  require_text(raw, path);
  std::string text;
  text.reserve(raw.size());
  for (size_t i = 0; i < raw.size(); ++i)
    if (!(raw[i] == '\r' && i + 1 < raw.size() && raw[i + 1] == '\n')) text += raw[i];
  const auto start = text.find("*** START OF");
  if (start != std::string::npos) {
    const auto body = text.find('\n', start);
    const auto end = text.find("*** END OF", body);
    text = text.substr(body + 1, end == std::string::npos ? std::string::npos : end - body - 1);
  }
  if (text.empty()) throw std::runtime_error("text file '" + path + "' has no text");
  return text;
}

CharTokenizer::CharTokenizer(const std::string& text) {
  ids_.fill(-1);
  bool seen[256] = {};
  for (unsigned char c : text) seen[c] = true;
  for (int c = 0; c < 256; ++c) {
    if (!seen[c]) continue;
    ids_[c] = static_cast<int64_t>(chars_.size());
    chars_ += static_cast<char>(c);
  }
  if (chars_.empty()) throw std::invalid_argument("CharTokenizer: empty text");
}

std::vector<int64_t> CharTokenizer::encode(const std::string& text) const {
  std::vector<int64_t> out;
  out.reserve(text.size());
  for (unsigned char c : text) {
    if (ids_[c] < 0)
      throw std::invalid_argument("CharTokenizer: character code " + std::to_string(int(c)) +
                                  " is not in the vocabulary");
    out.push_back(ids_[c]);
  }
  return out;
}

std::string CharTokenizer::decode(const std::vector<int64_t>& ids) const {
  std::string s;
  for (int64_t id : ids) {
    if (id < 0 || id >= vocab_size())
      throw std::invalid_argument("CharTokenizer: id " + std::to_string(id) + " out of range");
    s += chars_[static_cast<size_t>(id)];
  }
  return s;
}

std::shared_ptr<TensorDataset> make_lm_dataset(const at::Tensor& tokens, int64_t seq_len) {
  if (seq_len <= 0) throw std::invalid_argument("make_lm_dataset: seq_len must be > 0");
  const int64_t n = (tokens.numel() - 1) / seq_len;
  if (n <= 0) {
    throw std::invalid_argument("make_lm_dataset: " + std::to_string(tokens.numel()) +
                                " tokens are too few for one window of " + std::to_string(seq_len));
  }
  const at::Tensor t = tokens.reshape({-1}).to(at::kLong);
  const at::Tensor inputs = t.narrow(0, 0, n * seq_len).reshape({n, seq_len}).contiguous();
  const at::Tensor labels = t.narrow(0, 1, n * seq_len).reshape({n, seq_len}).contiguous();
  return std::make_shared<TensorDataset>(Batch({{"input_ids", inputs}, {"labels", labels}}));
}

}  // namespace composer
