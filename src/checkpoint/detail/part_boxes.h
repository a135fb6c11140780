// The rectangular boxes of a whole tensor that a rank's part covers (the elements [begin, end) of its piece's
// row-major flattening, the piece the whole tensor or its tensor-parallel part), as a sharded (DCP) checkpoint stores
// them in chunks and reads them back.
#pragma once

#include "composer/dist/sharded_state.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace composer::detail {

/// A box of the whole tensor (`offsets`, `sizes`) and where the part's values hold it: the piece's box of
/// `box_sizes` starting at element `first` of the piece's flattening (a contiguous range of the values), narrowed
/// along `dim` from `start` (a tensor-parallel box crosses from one of the piece's blocks into the next there).
struct PlacedBox {
  std::vector<int64_t> offsets, sizes;
  int64_t first = 0;
  std::vector<int64_t> box_sizes;
  int64_t dim = 0, start = 0;
};

/// The boxes, in order, that cover the elements [begin, end) of the piece of a tensor of `shape`.
std::vector<PlacedBox> placed_boxes(const std::vector<int64_t>& shape, int64_t begin, int64_t end,
                                    const std::optional<dist::TensorParallelSplit>& piece);
/// The values of `box` as a view of `values` (the part's, which start at the piece's element `begin`).
at::Tensor box_view(const at::Tensor& values, int64_t begin, const PlacedBox& box);

}  // namespace composer::detail
