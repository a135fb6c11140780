#include "datasets/detail/token_sources.h"

#include "composer/data/bpe_tokenizer.h"
#include "composer/data/text.h"
#include "data/detail/pretrained_tokenizer.h"

#include <ATen/ATen.h>

namespace composer::datasets::detail {

std::shared_ptr<const Tokenizer> model_tokenizer(Hparams& h, const std::string& path) {
  if (path.empty()) h.fail("tokenizer", "a tokenizer.json, its directory, or a .gguf file");
  try {
    if (auto tokenizer = composer::detail::pretrained_tokenizer(path)) return tokenizer;
    h.error("tokenizer", "'" + path + "' holds no tokenizer.json");
  } catch (const std::runtime_error& e) {
    h.error("tokenizer", e.what());
  }
  return nullptr;
}

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

}  // namespace composer::datasets::detail
