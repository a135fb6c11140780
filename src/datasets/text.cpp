#include "composer/data/text.h"
#include "datasets/detail/entries.h"
#include "datasets/detail/loader_fields.h"

#include <ATen/ATen.h>

namespace composer::datasets::detail {
namespace {

// A public-domain text (Debian's Gutenberg files), tokenized per character or with GPT-2's BPE; the last
// val_fraction of the tokens is the test split.
struct TextFields {
  std::string path = "data/text/mobydick.txt";
  std::string vocab_dir = "data/gpt2";
  std::optional<std::string> split;
  int64_t seq_len = 128;
  int64_t text_limit = -1;
  double val_fraction = 0.1;
  LoaderFields loader;

  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit, bool gpt2) {
    visit("path", self.path, "a Gutenberg text file (tools/fetch_data.sh)");
    if (gpt2) visit("vocab_dir", self.vocab_dir, "gpt2.tiktoken, or encoder.json + vocab.bpe");
    visit("split", self.split, "'train' or 'test' (the last val_fraction); unset: as the data's role");
    visit("seq_len", self.seq_len, "tokens per sample");
    visit("text_limit", self.text_limit, "read only the first this many characters; -1: all");
    visit("val_fraction", self.val_fraction, "fraction of the tokens in the test split, in (0, 1)");
    LoaderFields::for_each_field(self.loader, visit);
  }
};

// The field list of the character-level or the GPT-2 data set (gpt2 adds vocab_dir).
template <bool kGpt2>
struct TextFieldsOf : TextFields {
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    TextFields::for_each_field(self, visit, kGpt2);
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

DataSource token_source(Hparams& h, const at::Tensor& tokens, int64_t seq_len, int64_t vocab_size,
                        const LoaderFields& loader, const DataRequest& request) {
  std::shared_ptr<TensorDataset> ds;
  try {
    ds = make_lm_dataset(tokens, seq_len);
  } catch (const std::invalid_argument& e) {
    h.error("seq_len", e.what());
  }
  DataSource source;
  source.language = true;
  source.vocab_size = vocab_size;
  source.loader = std::make_shared<DatasetLoader>(ds, loader_options(h, loader, request));
  return source;
}

}  // namespace

DatasetRegistry::Entry text_entry(bool gpt2) {
  const auto build = [gpt2](Hparams& h, const TextFields& f, const DataRequest& request) {
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
    if (gpt2) {
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
  if (gpt2) {
    return dataset_entry("gpt2_tokens", "GPT2Tokens", "a text file in GPT-2 BPE tokens", TextFieldsOf<true>(), build);
  }
  return dataset_entry("mobydick_chars", "MobyDickChars", "Moby Dick (or another text), character level",
                       TextFieldsOf<false>(), build);
}

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
