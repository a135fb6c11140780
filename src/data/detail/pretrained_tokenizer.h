// The tokenizer a pretrained model's path names, resolved one way for the model registry and the data sets.
#pragma once

#include "composer/data/bpe_tokenizer.h"

#include <memory>
#include <string>

namespace composer::detail {

/// A .gguf file's tokenizer, a tokenizer.json, or a directory's tokenizer.json; nullptr for a directory without one.
/// Throws std::runtime_error naming the file it cannot read.
std::shared_ptr<BpeTokenizer> pretrained_tokenizer(const std::string& path);

}  // namespace composer::detail
