// Tensor parallelism (Composer's parallelism_config: {tp: {tensor_parallel_degree}}, torch's parallelize_module with
// ColwiseParallel and RowwiseParallel, Megatron-LM's layout): the attention's query, key and value projections and the
// MLP's first layers are split by output features (each rank computes its heads' and its slice of the hidden
// features), the attention's output projection and the MLP's last layer by input features (each rank computes a
// partial sum, all-reduced over the tensor-parallel group in the forward). The input of a column-parallel layer is
// replicated, its gradient all-reduced over the group in the backward. Where the plan says so the vocabulary splits
// too: the token embedding's rows and the head's logits (gathered, or left split for the loss under loss_parallel).
// Everything else (norms, position embeddings) stays replicated on the group's ranks and gets the same gradient on
// each of them.
//
// FullyShardedDataParallel applies it (its options' tp section): the world is a mesh (replicate, shard, tp), the
// tensor-parallel group the innermost `tensor_parallel_degree` consecutive ranks, and FSDP shards each rank's
// tensor-parallel part over the ranks that hold the same part (the data-parallel ranks).
#pragma once

#include "composer/dist/dist.h"
#include "composer/nn/tensor_parallel_plan.h"

#include <ATen/core/Tensor.h>
#include <torch/arg.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace torch::nn {
class Module;
}

namespace composer::dist {

/// Entries by dotted module name (patterns with '*'), of the whole model as the strategy receives it.
using TensorParallelPlan = std::vector<nn::ParallelLayerPlan>;

/// The plan the model's modules describe (every nn::TensorParallelizable submodule's entries, under its name): the
/// model zoo's Llama-family decoders, GPT-2 and BERT. std::invalid_argument when no module describes one.
TensorParallelPlan default_tensor_parallel_plan(const torch::nn::Module& model);

struct TPOptions {
  /// Composer's tensor_parallel_degree: the ranks of each tensor-parallel group (consecutive ranks; -1: what the
  /// world size and the data-parallel degrees leave). 1 is no tensor parallelism (Composer warns and drops it).
  TORCH_ARG(int64_t, tensor_parallel_degree) = 1;
  /// Composer's layer_plan; unset: default_tensor_parallel_plan(model). Set in code only.
  TORCH_ARG(std::optional<TensorParallelPlan>, layer_plan);
  /// torchtitan's loss parallelism: where the plan splits the vocabulary, a training forward leaves the logits split
  /// and the loss (ComposerLanguageModel's) is computed from each rank's slice (nn::SplitLogits) instead of gathering
  /// them. A custom loss or algorithm that reads the logits must then ask nn::SplitLogits.
  TORCH_ARG(bool, loss_parallel) = false;
  /// Megatron's sequence parallelism: in a training forward the activations between the split layers (the norms and
  /// the residual stream) hold this rank's slice of the sequence: the row-parallel layers and the embedding
  /// reduce-scatter their output over the sequence instead of all-reducing it, the column-parallel layers and the head
  /// all-gather their input. The plan's SEQUENCE entries (the Llama decoder's norms) then compute on the slice. Needs a
  /// plan that splits the token embedding and every layer between it and the head (the Llama family's default), or
  /// that marks the region's start and end (SEQUENCE_START, SEQUENCE_END: GPT-2's), and sequences whose length the
  /// degree divides.
  TORCH_ARG(bool, sequence_parallel) = false;

 public:
  /// The keys a config sets (Composer's names; loss_parallel is torchtitan's).
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("tensor_parallel_degree", self.tensor_parallel_degree_,
          "ranks per tensor-parallel group (consecutive ranks); -1: what the data-parallel degrees leave");
    visit("loss_parallel", self.loss_parallel_,
          "the language-model loss from each rank's slice of the vocabulary's logits, not gathered (torchtitan's)");
    visit("sequence_parallel", self.sequence_parallel_,
          "the norms and residual stream on each rank's slice of the sequence (Megatron's; the Llama and GPT-2 plans)");
  }
};

/// Where a rank's part of a tensor-parallel parameter sits in the whole one: dimension `dim` is `chunks` equal
/// blocks, each split in `degree` equal slices, and rank `rank` holds slice `rank` of each block.
struct TensorParallelSplit {
  int64_t dim = 0;
  int64_t chunks = 1;
  int64_t degree = 1;
  int64_t rank = 0;
  /// This rank's part of `whole` (a copy, contiguous).
  at::Tensor local_of(const at::Tensor& whole) const;
  /// The whole tensor from every rank's part, in rank order.
  at::Tensor whole_of(const std::vector<at::Tensor>& parts) const;
};

/// A parameter the plan split, by its name in the model.
struct SplitParameter {
  std::string name;
  at::Tensor parameter;
  TensorParallelSplit split;
};

/// Applies the plan for the tensor-parallel `group`: each matched composer::nn::Linear (or Embedding), a child of a
/// composer::nn::Composite, is replaced by a layer computing with this rank's slice of its weight (and bias, when
/// column-parallel) and running the group's collectives; the parameters are the same tensors, narrowed in place, so
/// that references to them (an optimizer's) stay valid. Returns the split parameters. std::invalid_argument naming the
/// module for a matched module that is not an nn::Linear child of a Composite, a split that does not divide by the
/// group's size (in whole granules), or an entry that matches nothing.
/// The plan is `options`' layer_plan, or default_tensor_parallel_plan(model); its loss_parallel and sequence_parallel
/// apply (std::invalid_argument for sequence_parallel with a plan that splits no embedding).
std::vector<SplitParameter> parallelize(torch::nn::Module& model, const Group& group,
                                        const TPOptions& options = TPOptions());

}  // namespace composer::dist
