// A deferred parameter narrowed before it is materialized (a tensor-parallel split of a model whose initialization
// is deferred): it takes its part's shape at once, and materializing draws (or reads) its whole value exactly as
// before, in the record's order, and keeps only the part.
#pragma once

#include "composer/nn/deferred_init.h"

#include <ATen/core/Tensor.h>

#include <functional>

namespace composer::nn::detail {

/// A reader of the part's flattening made from a reader of the whole tensor's.
using PartOfReader = std::function<PartReader(PartReader whole)>;

/// `parameter` (deferred: nn::is_deferred) is shaped `local` from now on; nn::materialize gives it `keep(whole)`,
/// shaped `local`, where `whole` is the value it would have had (drawn from the same stream, or read whole from a
/// pretrained file). `part_of`, when given, reads the part's elements from a pretrained file without the whole
/// tensor, so that a sharding strategy reading by parts (nn::read_part) reads only what it keeps of the part.
/// Narrowing again composes. Throws std::logic_error when the parameter is not deferred.
void narrow_deferred(const at::Tensor& parameter, at::IntArrayRef local,
                     std::function<at::Tensor(const at::Tensor& whole)> keep, PartOfReader part_of = {});

}  // namespace composer::nn::detail
