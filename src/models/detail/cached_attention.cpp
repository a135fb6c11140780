#include "models/detail/cached_attention.h"

#include <ATen/ATen.h>

#include <optional>

namespace composer::models::detail {

at::Tensor attend_cached(const at::Tensor& q, at::Tensor k, at::Tensor v, LayerKVCache* cache, int64_t groups,
                         double dropout) {
  const int64_t l = q.size(2);
  const int64_t past = cache ? cache->length() : 0;
  if (cache) {
    if (past > 0) {
      k = at::cat({cache->keys, k}, 2);
      v = at::cat({cache->values, v}, 2);
    }
    cache->keys = k;
    cache->values = v;
  }
  if (groups > 1) {
    k = k.repeat_interleave(groups, 1);
    v = v.repeat_interleave(groups, 1);
  }
  std::optional<at::Tensor> mask;
  bool causal = l > 1;
  if (past > 0 && l > 1) {  // new queries after cached keys: query i sees keys up to past + i
    mask = at::ones({l, past + l}, q.options().dtype(at::kBool)).tril(past);
    causal = false;
  }
  return at::scaled_dot_product_attention(q, k, v, mask, dropout, causal);
}

}  // namespace composer::models::detail
