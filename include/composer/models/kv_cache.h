// The key-value cache of a causal decoder: each layer's keys and values of the positions seen so far, so generation
// runs the model over one new token per step instead of the whole sequence.
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

namespace composer::models {

/// One attention layer's cache: keys and values [B, kv_heads, positions, head_dim] (undefined while empty).
struct LayerKVCache {
  at::Tensor keys, values;
  int64_t length() const { return keys.defined() ? keys.size(2) : 0; }
};

/// A decoder's cache: one entry per layer, created on first use.
struct KVCache {
  std::vector<LayerKVCache> layers;
  /// Positions already cached (0 for an empty cache).
  int64_t length() const { return layers.empty() ? 0 : layers.front().length(); }
};

/// A causal model that can run incrementally: logits [B, L, V] for `ids` [B, L] at positions cache.length() ..,
/// extending `cache` with them. generate_tokens uses it when the model has it and supports_cache() says yes.
class IncrementalDecoder {
 public:
  virtual ~IncrementalDecoder() = default;
  virtual at::Tensor forward_cached(const at::Tensor& ids, KVCache& cache) = 0;
  virtual bool supports_cache() const = 0;
};

}  // namespace composer::models
