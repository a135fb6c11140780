// Activation checkpointing: a layer whose forward keeps only its input and recomputes its activations during the
// backward pass (PyTorch's torch.utils.checkpoint in its reentrant form, the one Composer's FSDP uses by default),
// trading compute for memory.
#pragma once

#include "composer/nn/layer.h"

#include <functional>
#include <memory>
#include <string>

namespace composer::nn {

/// Runs `inner` without keeping its activations. Backward recomputes inner's forward from the saved input with
/// the random state (CPU, and the input's CUDA device) and the autocast state of the first forward, so dropout draws
/// the same masks, then backpropagates through the recomputation: parameter gradients accumulate as without
/// checkpointing, in the same order of operations. Unlike PyTorch's reentrant checkpoint, gradients reach the
/// parameters even when the input needs none (the first layer of a model).
/// The wrapper holds inner's parameters, buffers and children under inner's own names, so the model's
/// named_parameters() and state dict do not change. Requires: inner's forward takes and returns one tensor and
/// draws random numbers only from those generators.
/// With `offload_input` (Composer's activation_cpu_offload together with activation_checkpointing) the kept input
/// waits for the backward in host memory (pinned, copied without blocking) and is copied back to its device for the
/// recomputation; an input already in host memory stays where it is.
class CheckpointedLayer : public Layer {
 public:
  explicit CheckpointedLayer(std::shared_ptr<Layer> inner, bool offload_input = false);
  at::Tensor forward(const at::Tensor& x) override;
  Layer& inner() const { return *inner_; }
  Layer* stands_in_for() const override { return inner_.get(); }
  bool offloads_input() const { return offload_input_; }

 private:
  std::shared_ptr<Layer> inner_;
  bool offload_input_ = false;
};

/// Which layers to checkpoint: called with each submodule's dotted name and the module.
using CheckpointPolicy = std::function<bool(const std::string& name, const torch::nn::Module& module)>;

/// Wraps every submodule of `model` that `policy` picks in a CheckpointedLayer, in place (through its parent's
/// Composite::replace), and returns how many. A picked module inside a picked one is left alone (the outer one
/// recomputes it). Throws std::invalid_argument naming a picked module whose parent is not a composer::nn::Composite
/// (no other parent can be rewired) or that is not a Layer.
/// `offload_input`: as CheckpointedLayer's.
int64_t apply_activation_checkpointing(torch::nn::Module& model, const CheckpointPolicy& policy,
                                       bool offload_input = false);

}  // namespace composer::nn
