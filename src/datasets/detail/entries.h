// The registry entries, one builder per family of data sets (private to src/datasets).
#pragma once

#include "composer/datasets/registry.h"

namespace composer::datasets::detail {

/// mnist, fashion_mnist (IDX files) and synthetic_images.
DatasetRegistry::Entry mnist_entry(bool fashion);
DatasetRegistry::Entry synthetic_images_entry();
/// mobydick_chars, gpt2_tokens (a Gutenberg text) and synthetic_tokens.
DatasetRegistry::Entry text_entry(bool gpt2);
DatasetRegistry::Entry synthetic_tokens_entry();

/// Builds an entry whose Fields are read from the hyperparameters and handed to `build`.
template <class Fields, class Build>
DatasetRegistry::Entry dataset_entry(std::string name, std::string class_name, std::string summary, Fields defaults,
                                     Build build) {
  DatasetRegistry::Entry e;
  e.name = std::move(name);
  e.class_name = std::move(class_name);
  e.summary = std::move(summary);
  e.fields = describe_fields(defaults);
  e.make = [defaults, build](Hparams& h, const DataRequest& request) {
    return std::make_shared<DataSource>(build(h, read_options(h, defaults), request));
  };
  return e;
}

}  // namespace composer::datasets::detail
