#include "checkpoint/detail/part_boxes.h"

#include <algorithm>

namespace composer::detail {
namespace {

struct Box {
  std::vector<int64_t> offsets, sizes;
  int64_t first = 0;
};

// The boxes that cover the row-major elements [begin, end) of a tensor of `shape`: per dimension at most a partial
// row, a block of whole rows and a partial row. Each box is a contiguous range of the flattening, in order.
void boxes(const std::vector<int64_t>& shape, size_t dim, int64_t begin, int64_t end, std::vector<int64_t> prefix,
           int64_t base, std::vector<Box>& out) {
  if (begin >= end) return;
  if (dim == shape.size()) {  // a 0-dim tensor: its one element
    out.push_back({prefix, {}, base});
    return;
  }
  int64_t inner = 1;
  for (size_t d = dim + 1; d < shape.size(); ++d) inner *= shape[d];
  const auto whole = [&](int64_t row_begin, int64_t row_end) {
    Box b;
    b.offsets = prefix;
    b.offsets.push_back(row_begin);
    for (size_t d = dim + 1; d < shape.size(); ++d) b.offsets.push_back(0);
    b.sizes.assign(prefix.size(), 1);
    b.sizes.push_back(row_end - row_begin);
    for (size_t d = dim + 1; d < shape.size(); ++d) b.sizes.push_back(shape[d]);
    b.first = base + row_begin * inner;
    out.push_back(std::move(b));
  };
  const int64_t first_row = begin / inner, last_row = (end - 1) / inner;
  if (inner == 1) {
    whole(begin, end);
    return;
  }
  const auto partial = [&](int64_t row, int64_t from, int64_t to) {
    std::vector<int64_t> p = prefix;
    p.push_back(row);
    boxes(shape, dim + 1, from, to, p, base + row * inner, out);
  };
  if (first_row == last_row) {
    if (begin % inner == 0 && end - begin == inner)
      whole(first_row, first_row + 1);
    else
      partial(first_row, begin - first_row * inner, end - first_row * inner);
    return;
  }
  int64_t full_begin = first_row;
  if (begin % inner != 0) {
    partial(first_row, begin % inner, inner);
    full_begin = first_row + 1;
  }
  const int64_t full_end = end % inner == 0 ? last_row + 1 : last_row;
  if (full_begin < full_end) whole(full_begin, full_end);
  if (end % inner != 0) partial(last_row, 0, end % inner);
}

}  // namespace

std::vector<PlacedBox> placed_boxes(const std::vector<int64_t>& shape, int64_t begin, int64_t end,
                                    const std::optional<dist::TensorParallelSplit>& piece) {
  std::vector<Box> local;
  boxes(dist::piece_shape(shape, piece), 0, begin, end, {}, 0, local);
  std::vector<PlacedBox> out;
  for (const Box& b : local) {
    if (!piece || b.sizes.empty()) {
      out.push_back({b.offsets, b.sizes, b.first, b.sizes, 0, 0});
      continue;
    }
    // Along the split dimension the piece is `chunks` slices, each from its own block of the whole tensor.
    const auto d = static_cast<size_t>(piece->dim);
    const int64_t slice = shape[d] / piece->degree / piece->chunks, block = shape[d] / piece->chunks;
    for (int64_t c = b.offsets[d]; c < b.offsets[d] + b.sizes[d];) {
      const int64_t k = c / slice, stop = std::min(b.offsets[d] + b.sizes[d], (k + 1) * slice);
      PlacedBox p{b.offsets, b.sizes, b.first, b.sizes, piece->dim, c - b.offsets[d]};
      p.offsets[d] = k * block + piece->rank * slice + (c - k * slice);
      p.sizes[d] = stop - c;
      out.push_back(std::move(p));
      c = stop;
    }
  }
  return out;
}

at::Tensor box_view(const at::Tensor& values, int64_t begin, const PlacedBox& box) {
  int64_t n = 1;
  for (int64_t s : box.box_sizes) n *= s;
  const at::Tensor whole_box = values.narrow(0, box.first - begin, n).view(box.box_sizes);
  if (box.box_sizes.empty()) return whole_box;
  return whole_box.narrow(box.dim, box.start, box.sizes[static_cast<size_t>(box.dim)]);
}

}  // namespace composer::detail
