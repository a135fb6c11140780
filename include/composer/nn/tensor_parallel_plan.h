// How a module's Linear layers split over a tensor-parallel group (torch's ColwiseParallel and RowwiseParallel), as
// the module itself describes it: the model zoo's attention and MLP blocks implement TensorParallelizable, and
// dist::default_tensor_parallel_plan collects their entries (docs/fsdp.md has the table per architecture).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace composer::nn {

/// How a Linear is split over the tensor-parallel group.
enum class ParallelStyle {
  COLWISE,  ///< the output features split: each rank computes its slice of the output (torch's ColwiseParallel)
  ROWWISE,  ///< the input features split: each rank computes a partial output, summed over the group (RowwiseParallel)
};
/// "colwise", "rowwise".
std::string to_string(ParallelStyle style);
/// "colwise" or "rowwise" (any case; torch's class names ColwiseParallel and RowwiseParallel too);
/// std::invalid_argument naming `key` and the choices otherwise.
ParallelStyle parallel_style_from_string(const std::string& text, const std::string& key);

/// One entry of a tensor-parallel plan: the composer::nn::Linear children whose dotted name matches `name` ('*'
/// matches one name component) split in `style`.
struct ParallelLayerPlan {
  std::string name;
  ParallelStyle style = ParallelStyle::COLWISE;
  /// The split dimension (COLWISE: the output features, ROWWISE: the input ones) is `chunks` equal blocks, each split
  /// over the group, so that every rank holds its slice of each block (a fused q, k, v projection: 3).
  int64_t chunks = 1;
  /// Each rank's slice of a block is a whole number of these features (an attention head's: its dimension), so that
  /// the group's size must divide the block's count of them.
  int64_t granule = 1;
};

/// A module that knows how its Linear children split over a tensor-parallel group.
class TensorParallelizable {
 public:
  virtual ~TensorParallelizable() = default;
  /// Its entries, named relative to the module.
  virtual std::vector<ParallelLayerPlan> tensor_parallel_plan() const = 0;
};

}  // namespace composer::nn
