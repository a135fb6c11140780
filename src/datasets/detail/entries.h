// The registry entries, one builder per family of data sets (private to src/datasets).
#pragma once

#include "composer/datasets/registry.h"

namespace composer::datasets::detail {

/// mnist, fashion_mnist (IDX files) and synthetic_images.
DatasetRegistry::Entry mnist_entry(bool fashion);
DatasetRegistry::Entry synthetic_images_entry();
/// mobydick_chars, gpt2_tokens (a Gutenberg text) and synthetic_tokens.
DatasetRegistry::Entry text_entry(bool gpt2);
/// text_tokens: a text file in a pretrained model's tokens (its tokenizer.json or GGUF).
DatasetRegistry::Entry model_text_entry();
/// jsonl_tokens: JSON-lines documents or prompt/response pairs in a pretrained model's tokens.
DatasetRegistry::Entry jsonl_entry();
DatasetRegistry::Entry synthetic_tokens_entry();
/// streaming (MDS shards through StreamingDataset; built with COMPOSER_WITH_STREAMING).
DatasetRegistry::Entry streaming_entry();

/// A data set entry: `Fields` read from the hyperparameters, then `build(hparams, fields, request)` -> DataSource.
template <class Fields, class Build>
DatasetRegistry::Entry dataset_entry(std::string name, std::string class_name, std::string summary, Fields defaults,
                                     Build build) {
  return registry_entry<DataSource, const DataRequest&>(std::move(name), std::move(class_name), std::move(summary),
                                                        std::move(defaults), std::move(build));
}

}  // namespace composer::datasets::detail
