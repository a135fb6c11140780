// How a module's Linear and Embedding layers split over a tensor-parallel group (torch's ColwiseParallel and
// RowwiseParallel), as the module itself describes it: the model zoo's attention and MLP blocks (and the Llama
// decoder's vocabulary) implement TensorParallelizable, and dist::default_tensor_parallel_plan collects their entries
// (docs/fsdp.md has the table per architecture).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace composer::nn {

/// How a Linear (or an Embedding) is split over the tensor-parallel group.
enum class ParallelStyle {
  COLWISE,  ///< the output features split: each rank computes its slice of the output (torch's ColwiseParallel)
  /// The input features split: each rank computes a partial output, summed over the group (RowwiseParallel). On an
  /// Embedding: its rows (the vocabulary) split; each rank looks up the ids in its rows, zeros for the others',
  /// summed over the group (torch's RowwiseParallel on nn.Embedding, Megatron's VocabParallelEmbedding).
  ROWWISE,
  /// Nothing splits: under TPOptions::sequence_parallel the layer (a norm) computes on this rank's slice of the
  /// sequence and its parameters' gradients are summed over the group (torch's SequenceParallel); otherwise the entry
  /// leaves the layer as it is.
  SEQUENCE,
  /// Nothing splits: under TPOptions::sequence_parallel the layer's output (the whole sequence, the same on every
  /// rank) is cut to this rank's slice of the sequence, where the sequence-parallel region starts in a model whose
  /// token embedding is not split (GPT-2's embedding dropout; Megatron's scatter_to_sequence_parallel_region). The
  /// backward gathers the gradient. Otherwise the entry leaves the layer as it is.
  SEQUENCE_START,
  /// Nothing splits: under TPOptions::sequence_parallel the layer's input (this rank's slice of the sequence) is
  /// gathered first and the layer runs on the whole sequence, where the region ends before layers every rank computes
  /// whole (GPT-2's final norm and tied head; torch's PrepareModuleInput from Shard(1) to Replicate()). The backward
  /// keeps this rank's slice of the gradient. Otherwise the entry leaves the layer as it is.
  SEQUENCE_END,
};
/// "colwise", "rowwise", "sequence", "sequence_start", "sequence_end".
std::string to_string(ParallelStyle style);
/// One of to_string's names (any case; torch's class names ColwiseParallel, RowwiseParallel and SequenceParallel
/// too); std::invalid_argument naming `key` and the choices otherwise.
ParallelStyle parallel_style_from_string(const std::string& text, const std::string& key);

/// One entry of a tensor-parallel plan: the composer::nn::Linear (or, ROWWISE, composer::nn::Embedding; SEQUENCE, any
/// Layer) children whose dotted name matches `name` ('*' matches one name component) split in `style`.
struct ParallelLayerPlan {
  std::string name;
  ParallelStyle style = ParallelStyle::COLWISE;
  /// The split dimension (COLWISE: the output features, ROWWISE: the input ones) is `chunks` equal blocks, each split
  /// over the group, so that every rank holds its slice of each block (a fused q, k, v projection: 3).
  int64_t chunks = 1;
  /// Each rank's slice of a block is a whole number of these features (an attention head's: its dimension), so that
  /// the group's size must divide the block's count of them.
  int64_t granule = 1;
  /// COLWISE: the layer is the model's head over the vocabulary: each rank's slice of the logits is gathered over the
  /// group into the whole vocabulary's (torch's output_layouts=Replicate()), or left split for the loss while
  /// training under TPOptions::loss_parallel (SplitLogits).
  bool vocabulary_head = false;
};

/// An Embedding whose rows (the vocabulary) a tensor-parallel group splits: a head tied to it computes its logits
/// through it (models look through Layer::stands_in_for to find it).
class VocabularyParallel {
 public:
  virtual ~VocabularyParallel() = default;
  /// hidden [..., H] -> the logits over the whole vocabulary [..., V]: each rank multiplies by its rows, the slices
  /// gathered over the group.
  virtual at::Tensor tied_logits(const at::Tensor& hidden) = 0;
};

/// A head whose logits a tensor-parallel group splits over the vocabulary (rank r the slice [r V/N, (r+1) V/N)): under
/// TPOptions::loss_parallel a forward that records gradients leaves them split, and the loss and metrics ask it.
class SplitLogits {
 public:
  virtual ~SplitLogits() = default;
  /// The whole vocabulary's size V (split logits have V / N).
  virtual int64_t vocabulary_size() const = 0;
  /// Split logits [..., V/N] -> the whole vocabulary's [..., V], gathered over the group (no gradient).
  virtual at::Tensor whole_logits(const at::Tensor& split) = 0;
  /// The token cross entropy of split logits [..., V/N] against `labels` [...] (`ignore_index` skipped), the mean
  /// over the counted tokens (`mean`) or their sum, from each rank's slice (three all-reduces of one value per token).
  virtual at::Tensor cross_entropy(const at::Tensor& split, const at::Tensor& labels, int64_t ignore_index,
                                   bool mean) = 0;
};

/// A module that knows how its Linear children split over a tensor-parallel group.
class TensorParallelizable {
 public:
  virtual ~TensorParallelizable() = default;
  /// Its entries, named relative to the module.
  virtual std::vector<ParallelLayerPlan> tensor_parallel_plan() const = 0;
};

}  // namespace composer::nn
