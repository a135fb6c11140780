#include "data/detail/pre_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <memory>
#include <stdexcept>

namespace composer::detail {
namespace {

// GPT-2's pattern (tokenizers' ByteLevel with use_regex).
constexpr const char* kGpt2 = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
// Llama 3's Split pattern (its tokenizer.json); Qwen2's is the same with single digits.
constexpr const char* kLlama3 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

pcre2_code* compile(const char* pattern) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern), PCRE2_ZERO_TERMINATED,
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error, &offset, nullptr);
  if (!code) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    throw std::logic_error("pre-tokenizer pattern does not compile at " + std::to_string(offset) + ": " +
                           reinterpret_cast<const char*>(message));
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter where JIT is unavailable
  return code;
}

// Length of the UTF-8 character starting at `c` (1 for a stray byte).
size_t char_length(unsigned char c) { return c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1; }

}  // namespace

std::string pre_tokenizer_pattern(PreTokenizer kind) {
  switch (kind) {
    case PreTokenizer::Llama3:
      return kLlama3;
    case PreTokenizer::Qwen2:
      return kQwen2;
    default:
      return kGpt2;
  }
}

PreTokenizerPattern::PreTokenizerPattern(PreTokenizer kind) {
  switch (kind) {
    case PreTokenizer::Gpt2:
      main_ = compile(kGpt2);
      break;
    case PreTokenizer::Gpt2SplitDigits:
      digits_ = compile(R"(\p{N})");
      main_ = compile(kGpt2);
      break;
    case PreTokenizer::Llama3:
      main_ = compile(kLlama3);
      break;
    case PreTokenizer::Qwen2:
      main_ = compile(kQwen2);
      break;
  }
}

PreTokenizerPattern::~PreTokenizerPattern() {
  pcre2_code_free(static_cast<pcre2_code*>(digits_));
  pcre2_code_free(static_cast<pcre2_code*>(main_));
}

void PreTokenizerPattern::split_with(const void* code_ptr, std::string_view text,
                                     std::vector<std::string_view>& out) const {
  const auto* code = static_cast<const pcre2_code*>(code_ptr);
  std::unique_ptr<pcre2_match_data, void (*)(pcre2_match_data*)> md(pcre2_match_data_create_from_pattern(code, nullptr),
                                                                    pcre2_match_data_free);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0, gap = 0;  // gap: start of text not yet emitted
  while (pos < text.size()) {
    const int rc = pcre2_match(code, subject, text.size(), pos, 0, md.get(), nullptr);
    if (rc < 0) break;  // no further match (PCRE2_ERROR_NOMATCH)
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
    const size_t start = ov[0], end = ov[1];
    if (start > gap) out.push_back(text.substr(gap, start - gap));
    if (end > start) {
      out.push_back(text.substr(start, end - start));
      pos = gap = end;
    } else {  // an empty match: step over one character
      pos = start + char_length(static_cast<unsigned char>(text[start]));
      gap = start;
    }
  }
  if (gap < text.size()) out.push_back(text.substr(gap));
}

std::vector<std::string_view> PreTokenizerPattern::split(std::string_view text) const {
  std::vector<std::string_view> out;
  if (!digits_) {
    split_with(main_, text, out);
    return out;
  }
  std::vector<std::string_view> parts;
  split_with(digits_, text, parts);
  for (const auto& p : parts) split_with(main_, p, out);
  return out;
}

}  // namespace composer::detail
