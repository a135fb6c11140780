// The vocabulary split over a tensor-parallel group (Megatron's vocabulary-parallel embedding and cross entropy,
// torchtitan's loss parallelism): rank r holds rows [r V/N, (r+1) V/N) of the token embedding and computes that slice
// of the logits.
#pragma once

#include "composer/dist/dist.h"
#include "composer/nn/layer.h"
#include "composer/nn/layers.h"
#include "composer/nn/tensor_parallel_plan.h"

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace composer::dist::detail {

/// The token cross entropy of logits [..., V/N] split over group `group` (this rank's slice begins at `begin`)
/// against `labels`: the mean over the tokens not `ignore_index` (`mean`) or the sum; its gradient is this rank's
/// slice of softmax - one-hot.
at::Tensor split_cross_entropy(const at::Tensor& logits, const at::Tensor& labels, int64_t begin, int64_t ignore_index,
                               bool mean, int64_t group);

/// This rank's slice of a vocabulary, as the loss and the metrics ask it (nn::SplitLogits).
class VocabularySlice : public nn::SplitLogits {
 public:
  VocabularySlice(const Group& group, int64_t rows, bool loss_parallel, bool sequence_parallel);
  int64_t vocabulary_size() const override { return rows_ * size_; }
  at::Tensor whole_logits(const at::Tensor& split) override;
  at::Tensor cross_entropy(const at::Tensor& split, const at::Tensor& labels, int64_t ignore_index, bool mean) override;

 protected:
  /// The head's input: under sequence parallelism as the final norm gathered it (the gather's backward sums the
  /// gradient), otherwise the hidden states with their gradient summed over the group.
  at::Tensor head_input(const at::Tensor& hidden, bool training);
  /// This rank's logits [..., V/N] as the head returns them: left split in a forward that records gradients under
  /// loss parallelism, gathered otherwise.
  at::Tensor head_output(const at::Tensor& slice);
  /// Whether `weight` holds the whole vocabulary (Strategy::gather_full_weights, for an export): the layer then runs
  /// as the unsplit one, with no collective, so that one rank may run it alone (a TorchScript trace).
  bool whole(const at::Tensor& weight) const { return weight.size(0) != rows_; }
  int64_t group_, rows_, size_, begin_;
  bool loss_parallel_, sequence_parallel_;
};

/// A token embedding whose rows are this rank's slice of the vocabulary.
class ParallelEmbedding final : public nn::Layer, public nn::VocabularyParallel, public VocabularySlice {
 public:
  /// Takes over `inner`'s weight (already narrowed to this rank's rows), under its name.
  ParallelEmbedding(const nn::Embedding& inner, const Group& group, bool loss_parallel, bool sequence_parallel);
  /// ids [...] -> [..., H]: this rank's rows for its ids, zeros for the others', summed over the group (under
  /// sequence parallelism reduce-scattered: this rank's slice of the sequence).
  at::Tensor forward(const at::Tensor& ids) override;
  at::Tensor tied_logits(const at::Tensor& hidden) override;

 private:
  at::Tensor weight_;
};

/// A head over the vocabulary (a column-parallel Linear): this rank's slice of the logits.
class ParallelHead final : public nn::Layer, public VocabularySlice {
 public:
  /// Takes over `inner`'s parameters (already narrowed to this rank's rows of the vocabulary), under their names.
  ParallelHead(const nn::Linear& inner, const Group& group, bool loss_parallel, bool sequence_parallel);
  at::Tensor forward(const at::Tensor& hidden) override;

 private:
  at::Tensor weight_, bias_;
};

}  // namespace composer::dist::detail
