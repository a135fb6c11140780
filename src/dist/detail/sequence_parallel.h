// Sequence parallelism (Megatron-LM's, torch's SequenceParallel): in a training forward the activations between the
// split layers hold this rank's slice of the sequence (dimension 1 of [batch, sequence, features]): the embedding and
// the row-parallel layers reduce-scatter their output over the sequence; the norms compute on the slice (their
// parameters' gradients summed over the group) and all-gather their output for the attention, the MLP or the head
// that read it, whose column-parallel layers then take their input as it is (the gather's backward reduce-scatters,
// which sums the ranks' gradients as Megatron's f would).
#pragma once

#include "composer/dist/dist.h"
#include "composer/nn/layer.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>

namespace composer::dist::detail {

/// Whether a forward runs sequence-parallel now: `enabled` (TPOptions::sequence_parallel) and the layer in training
/// mode (evaluation and generation, in eval mode, run as without it). Training mode, not whether gradients are
/// recorded: activation checkpointing runs a layer's first forward without gradients, and every layer of the model
/// must agree on whether the sequence is split.
bool sequence_split(bool enabled, bool training);
/// The ranks' slices of the sequence put together (dimension 1), in rank order; the backward reduce-scatters the
/// gradient back to this rank's slice.
at::Tensor gather_sequence(const at::Tensor& x, int64_t group);
/// The sum of the ranks' x, this rank's slice of the sequence (a reduce-scatter over dimension 1); the backward
/// all-gathers the gradient. std::invalid_argument when the degree does not divide the sequence's length.
at::Tensor scatter_sequence(const at::Tensor& x, int64_t group);

/// This rank's slice of the sequence of x, which is the same on every rank; the backward all-gathers the gradient.
/// std::invalid_argument when the degree does not divide the sequence's length.
at::Tensor split_sequence(const at::Tensor& x, int64_t group);
/// The ranks' slices put together, for layers every rank computes whole; the backward keeps this rank's slice of the
/// gradient (which is the same on every rank).
at::Tensor gather_whole_sequence(const at::Tensor& x, int64_t group);

/// A layer (a norm) that computes on this rank's slice of the sequence and gathers its output over the sequence;
/// its parameters' gradients are summed over the group in the backward of a sequence-parallel forward.
class SequenceParallelLayer final : public nn::Layer {
 public:
  SequenceParallelLayer(std::shared_ptr<nn::Layer> inner, const Group& group);
  at::Tensor forward(const at::Tensor& x) override;
  nn::Layer* stands_in_for() const override { return inner_.get(); }

 private:
  std::shared_ptr<nn::Layer> inner_;
  int64_t group_;
};

/// Where the sequence-parallel region starts (ParallelStyle::SEQUENCE_START) or ends (SEQUENCE_END) at a layer that
/// itself splits nothing: the start cuts the layer's output to this rank's slice, the end gathers its input.
class SequenceBoundaryLayer final : public nn::Layer {
 public:
  SequenceBoundaryLayer(std::shared_ptr<nn::Layer> inner, const Group& group, bool start);
  at::Tensor forward(const at::Tensor& x) override;
  nn::Layer* stands_in_for() const override { return inner_.get(); }

 private:
  std::shared_ptr<nn::Layer> inner_;
  int64_t group_;
  bool start_;
};

}  // namespace composer::dist::detail
