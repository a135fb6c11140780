// Llama-family models from GGUF files (llama.cpp's format): the config from the file's metadata, the weights
// dequantized into models::Llama under Hugging Face's names. Architectures "llama" (Llama, Mistral, SmolLM) and
// "qwen2". GGUF converters permute the rows of q and k for llama.cpp's interleaved rotary layout; the loader undoes
// it, as transformers does, so the model computes what Hugging Face's LlamaForCausalLM computes from the same file.
#pragma once

#include "composer/models/llama.h"

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>

namespace composer::formats {
class GgufFile;
}

namespace composer::models {

/// The LlamaConfig that a GGUF file's metadata describes. Throws std::runtime_error naming the file and the key
/// (an architecture other than llama or qwen2, a missing size).
LlamaConfig llama_config_from_gguf(const formats::GgufFile& file);

/// A Llama with the file's weights, in `dtype` on the CPU. Throws std::runtime_error naming the file and the tensor
/// when one is missing, has another shape, or is not a Llama tensor; the file's own errors name it too.
std::shared_ptr<Llama> load_llama_gguf(const std::string& path, at::ScalarType dtype = at::kFloat);

/// The HF-layout weight of GGUF's q (n_head = query heads) or k (n_head = key-value heads) projection: llama.cpp's
/// converter interleaved each head's rotary halves; this puts them back (transformers' reverse_permute_weights).
at::Tensor unpermute_rotary_rows(const at::Tensor& weight, int64_t n_head);

}  // namespace composer::models
