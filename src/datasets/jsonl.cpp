// jsonl_tokens: JSON-lines fine-tuning data in a pretrained model's tokens, documents packed into windows or
// prompt/response pairs with the loss on the response only (data/finetuning.h).
#include "composer/data/finetuning.h"
#include "datasets/detail/entries.h"
#include "datasets/detail/loader_fields.h"
#include "datasets/detail/token_sources.h"

#include <ATen/ATen.h>

namespace composer::datasets::detail {
namespace {

struct JsonlFields {
  std::string path;
  std::string tokenizer;
  std::string format = "text";
  std::string text_key = "text";
  std::string prompt_key = "prompt";
  std::string response_key = "response";
  std::optional<std::string> split;
  int64_t seq_len = 256;
  double val_fraction = 0.1;
  LoaderFields loader;

  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("path", self.path, "a JSON-lines file, one record per line");
    visit("tokenizer", self.tokenizer, "the model's tokenizer: a tokenizer.json, its directory, or a .gguf file");
    visit("format", self.format,
          "text: documents joined with the end-of-sequence token and packed into windows; prompt_response: one "
          "sample per pair, the loss on the response only");
    visit("text_key", self.text_key, "text: the key of each document");
    visit("prompt_key", self.prompt_key, "prompt_response: the key of the prompt");
    visit("response_key", self.response_key, "prompt_response: the key of the response");
    visit("split", self.split, "'train' or 'test' (the last val_fraction of the records); unset: as the data's role");
    visit("seq_len", self.seq_len, "tokens per sample");
    visit("val_fraction", self.val_fraction, "fraction of the records in the test split, in (0, 1)");
    LoaderFields::for_each_field(self.loader, visit);
  }
};

// The records of this split: the first (1 - val_fraction) for train, the rest for test.
template <class T>
std::vector<T> split_records(Hparams& h, std::vector<T> all, double val_fraction, const std::string& split) {
  const auto cut = static_cast<size_t>(static_cast<double>(all.size()) * (1.0 - val_fraction));
  std::vector<T> part = split == "train" ? std::vector<T>(all.begin(), all.begin() + static_cast<long>(cut))
                                         : std::vector<T>(all.begin() + static_cast<long>(cut), all.end());
  if (part.empty()) h.fail("val_fraction", "a fraction that leaves records in the " + split + " split");
  return part;
}

std::vector<std::string> field_of(Hparams& h, const std::string& path, const std::string& key) {
  try {
    return read_jsonl_field(path, key);
  } catch (const std::runtime_error& e) {
    h.error("path", e.what());
  }
  return {};
}

DataSource build(Hparams& h, const JsonlFields& f, const DataRequest& request) {
  const int64_t seq_len = positive(h, "seq_len", f.seq_len);
  const std::string split = split_of(h, f.split, request);
  if (f.val_fraction <= 0 || f.val_fraction >= 1) h.fail("val_fraction", "a number in (0, 1)");
  if (f.format != "text" && f.format != "prompt_response") h.fail("format", "text or prompt_response");
  const auto tokenizer = model_tokenizer(h, f.tokenizer);
  const auto eos = tokenizer->eos_token();
  if (!eos) h.fail("tokenizer", "a tokenizer with an end-of-sequence token (to end documents and responses)");
  DataSource source;
  if (f.format == "text") {
    std::vector<int64_t> ids;
    for (const auto& doc : split_records(h, field_of(h, f.path, f.text_key), f.val_fraction, split)) {
      const auto t = tokenizer->encode(doc);
      ids.insert(ids.end(), t.begin(), t.end());
      ids.push_back(*eos);
    }
    source = token_source(h, at::tensor(ids, at::kLong), seq_len, tokenizer->vocab_size(), f.loader, request);
  } else {
    const auto prompts = field_of(h, f.path, f.prompt_key);
    const auto responses = field_of(h, f.path, f.response_key);
    std::vector<PromptResponse> pairs;
    for (size_t i = 0; i < prompts.size(); ++i)
      pairs.push_back({tokenizer->encode(prompts[i]), tokenizer->encode(responses[i])});
    std::shared_ptr<TensorDataset> ds;
    try {
      ds = make_prompt_response_dataset(split_records(h, pairs, f.val_fraction, split), seq_len, *eos, *eos);
    } catch (const std::invalid_argument& e) {
      h.error("path", e.what());
    }
    source.language = true;
    source.vocab_size = tokenizer->vocab_size();
    source.loader = std::make_shared<DatasetLoader>(ds, loader_options(h, f.loader, request));
  }
  source.tokenizer = tokenizer;
  return source;
}

}  // namespace

DatasetRegistry::Entry jsonl_entry() {
  return dataset_entry("jsonl_tokens", "JsonlTokens",
                       "JSON-lines documents or prompt/response pairs in a model's tokens", JsonlFields(), build);
}

}  // namespace composer::datasets::detail
