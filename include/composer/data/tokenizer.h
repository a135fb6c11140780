// The tokenizer interface: text <-> token ids, what data sets, generation and the CLI need from a tokenizer.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace composer {

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

}  // namespace composer
