// What the token data sets share: a model's tokenizer from a path, and a language-modelling source over tokens.
#pragma once

#include "composer/data/tokenizer.h"
#include "composer/datasets/registry.h"
#include "datasets/detail/loader_fields.h"

#include <memory>
#include <string>

namespace composer::datasets::detail {

/// A tokenizer.json, the directory holding one, or a GGUF file's tokenizer; errors name the key `tokenizer`.
std::shared_ptr<const Tokenizer> model_tokenizer(Hparams& h, const std::string& path);

/// Next-token windows of seq_len over `tokens` (make_lm_dataset), as a language data source.
DataSource token_source(Hparams& h, const at::Tensor& tokens, int64_t seq_len, int64_t vocab_size,
                        const LoaderFields& loader, const DataRequest& request);

}  // namespace composer::datasets::detail
