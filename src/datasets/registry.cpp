#include "composer/datasets/registry.h"

#include "datasets/detail/entries.h"

namespace composer::datasets {

const DatasetRegistry& dataset_registry() {
  static const DatasetRegistry registry("dataset", {
    detail::mnist_entry(/*fashion=*/false), detail::mnist_entry(/*fashion=*/true), detail::synthetic_images_entry(),
        detail::text_entry(/*gpt2=*/false), detail::text_entry(/*gpt2=*/true), detail::model_text_entry(),
        detail::jsonl_entry(), detail::synthetic_tokens_entry(),
#if COMPOSER_WITH_STREAMING
        detail::streaming_entry(),
#endif
  });
  return registry;
}

}  // namespace composer::datasets
