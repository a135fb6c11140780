#include "composer/data/text.h"
#include "datasets/detail/entries.h"
#include "datasets/detail/loader_fields.h"
#include "datasets/detail/token_sources.h"

#include <ATen/ATen.h>

namespace composer::datasets::detail {
namespace {

// How a text data set tokenizes: per character, with GPT-2's BPE, or with a model's tokenizer.
enum class TextVocab { Chars, Gpt2, Model };

// A public-domain text (Debian's Gutenberg files), tokenized per character, with GPT-2's BPE or with a pretrained
// model's tokenizer; the last val_fraction of the tokens is the test split.
struct TextFields {
  std::string path = "data/text/mobydick.txt";
  std::string vocab_dir = "data/gpt2";
  std::string tokenizer;
  std::optional<std::string> split;
  int64_t seq_len = 128;
  int64_t text_limit = -1;
  double val_fraction = 0.1;
  LoaderFields loader;

  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit, TextVocab vocab) {
    visit("path", self.path, "a Gutenberg text file (tools/fetch_data.sh)");
    if (vocab == TextVocab::Gpt2) visit("vocab_dir", self.vocab_dir, "gpt2.tiktoken, or encoder.json + vocab.bpe");
    if (vocab == TextVocab::Model)
      visit("tokenizer", self.tokenizer, "the model's tokenizer: a tokenizer.json, its directory, or a .gguf file");
    visit("split", self.split, "'train' or 'test' (the last val_fraction); unset: as the data's role");
    visit("seq_len", self.seq_len, "tokens per sample");
    visit("text_limit", self.text_limit, "read only the first this many characters; -1: all");
    visit("val_fraction", self.val_fraction, "fraction of the tokens in the test split, in (0, 1)");
    LoaderFields::for_each_field(self.loader, visit);
  }
};

// The field list of the character-level, the GPT-2 or the model-tokenizer data set (vocab_dir, tokenizer).
template <TextVocab kVocab>
struct TextFieldsOf : TextFields {
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    TextFields::for_each_field(self, visit, kVocab);
  }
};

struct SyntheticTokenFields {
  int64_t vocab_size = 64;
  int64_t num_samples = 256;
  int64_t seq_len = 128;
  int64_t data_seed = 0;
  std::optional<std::string> split;
  LoaderFields loader;

  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("vocab_size", self.vocab_size, "token ids");
    visit("num_samples", self.num_samples, "sequences per split");
    visit("seq_len", self.seq_len, "tokens per sample");
    visit("data_seed", self.data_seed, "seed of the tokens (the test split draws with data_seed + 1)");
    visit("split", self.split, "'train' or 'test'; unset: as the data's role");
    LoaderFields::for_each_field(self.loader, visit);
  }
};

template <TextVocab kVocab>
DatasetRegistry::Entry text_entry_of() {
  const auto build = [](Hparams& h, const TextFields& f, const DataRequest& request) {
    const int64_t seq_len = positive(h, "seq_len", f.seq_len);
    const std::string split = split_of(h, f.split, request);
    if (f.val_fraction <= 0 || f.val_fraction >= 1) h.fail("val_fraction", "a number in (0, 1)");
    std::string text;
    try {
      text = load_gutenberg_text(f.path);
    } catch (const std::runtime_error& e) {
      h.error("path", e.what());
    }
    if (f.text_limit > 0 && static_cast<size_t>(f.text_limit) < text.size())
      text.resize(static_cast<size_t>(f.text_limit));
    std::shared_ptr<const Tokenizer> tokenizer;
    if (kVocab == TextVocab::Model) {
      tokenizer = model_tokenizer(h, f.tokenizer);
    } else if (kVocab == TextVocab::Gpt2) {
      try {
        tokenizer = std::make_shared<Gpt2Tokenizer>(Gpt2Tokenizer::from_dir(f.vocab_dir));
      } catch (const std::runtime_error& e) {
        h.error("vocab_dir", e.what());
      }
    } else {
      // The vocabulary comes from the whole text, so both splits share it.
      tokenizer = std::make_shared<CharTokenizer>(text);
    }
    const std::vector<int64_t> ids = tokenizer->encode(text);
    const int64_t vocab_size = tokenizer->vocab_size();
    const auto cut = static_cast<int64_t>(static_cast<double>(ids.size()) * (1.0 - f.val_fraction));
    const at::Tensor all = at::tensor(ids, at::TensorOptions().dtype(at::kLong));
    const at::Tensor tokens = split == "train" ? all.narrow(0, 0, cut) : all.narrow(0, cut, all.size(0) - cut);
    DataSource source = token_source(h, tokens, seq_len, vocab_size, f.loader, request);
    source.tokenizer = tokenizer;
    return source;
  };
  if (kVocab == TextVocab::Model) {
    return dataset_entry("text_tokens", "TextTokens", "a text file in a pretrained model's tokens",
                         TextFieldsOf<kVocab>(), build);
  }
  if (kVocab == TextVocab::Gpt2) {
    return dataset_entry("gpt2_tokens", "GPT2Tokens", "a text file in GPT-2 BPE tokens", TextFieldsOf<kVocab>(), build);
  }
  return dataset_entry("mobydick_chars", "MobyDickChars", "Moby Dick (or another text), character level",
                       TextFieldsOf<kVocab>(), build);
}

}  // namespace

DatasetRegistry::Entry text_entry(bool gpt2) {
  return gpt2 ? text_entry_of<TextVocab::Gpt2>() : text_entry_of<TextVocab::Chars>();
}

DatasetRegistry::Entry model_text_entry() { return text_entry_of<TextVocab::Model>(); }

DatasetRegistry::Entry synthetic_tokens_entry() {
  return dataset_entry("synthetic_tokens", "SyntheticTokens", "random token sequences", SyntheticTokenFields(),
                       [](Hparams& h, const SyntheticTokenFields& f, const DataRequest& request) {
                         const int64_t vocab_size = positive(h, "vocab_size", f.vocab_size);
                         const int64_t seq_len = positive(h, "seq_len", f.seq_len);
                         const int64_t count = positive(h, "num_samples", f.num_samples);
                         auto gen = at::detail::createCPUGenerator(static_cast<uint64_t>(f.data_seed) +
                                                                   (split_of(h, f.split, request) == "train" ? 0 : 1));
                         const at::Tensor tokens =
                             at::randint(vocab_size, {count * seq_len + 1}, gen, at::TensorOptions().dtype(at::kLong));
                         return token_source(h, tokens, seq_len, vocab_size, f.loader, request);
                       });
}

}  // namespace composer::datasets::detail
