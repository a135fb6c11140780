// Causal attention over a key-value cache, shared by the decoders that generate incrementally (GPT, Llama).
#pragma once

#include "composer/models/kv_cache.h"

#include <ATen/core/Tensor.h>

namespace composer::models::detail {

/// Attends q [B, H, L, D] (the positions after those in `cache`) to the cached keys and values and to k, v
/// [B, H / groups, L, D], which are appended to `cache` first (no cache: a plain causal attention over k, v). Query i
/// sees the cached positions and the new ones up to i. Each group of `groups` query heads shares a key-value head.
at::Tensor attend_cached(const at::Tensor& q, at::Tensor k, at::Tensor v, LayerKVCache* cache, int64_t groups,
                         double dropout);

}  // namespace composer::models::detail
