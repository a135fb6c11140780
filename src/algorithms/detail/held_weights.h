// The weights an algorithm that keeps elementwise copies of them (EMA) reads and writes: every trainable parameter
// whole, or, under a strategy that splits them over the ranks (FSDP), this rank's part of each, as a view of the
// flat shard the optimizer steps (writing it changes the weights); and every buffer whole. Copies kept of these are
// sharded like the parameters, and an elementwise update of the parts equals one process's update of the whole.
#pragma once

#include "composer/dist/sharded_state.h"

#include <ATen/core/Tensor.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace torch::nn {
class Module;
}
namespace composer {
struct State;
}

namespace composer::algorithms::detail {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

struct HeldWeights {
  NamedTensors parameters;  // whole, or this rank's flattened part of each
  NamedTensors buffers;
  dist::ShardedState* sharded = nullptr;  // set when `parameters` are parts
  dist::NamedParts parts;                 // then: each part's place in its whole parameter
};

/// `model`'s parameters (those that require gradients, or with `frozen_too` all of them) and buffers, whole.
HeldWeights weights_of(const torch::nn::Module& model, bool frozen_too);

/// What `state`'s model holds now: the trainable parameters (requires_grad) and buffers of the model, the parameters
/// as parts once a sharded strategy has split the model. `frozen_too`: the parameters that need no gradient as well
/// (parts too under FSDP, which shards them).
HeldWeights held_weights(const State& state, bool frozen_too = false);

/// `whole` with each sharded parameter replaced by this rank's part of it (a clone, on the part's device), by
/// `held.parts`; std::invalid_argument naming `what` for a sharded parameter missing from `whole` or of another
/// shape.
std::map<std::string, at::Tensor> parts_of(const HeldWeights& held, const std::map<std::string, at::Tensor>& whole,
                                           const std::string& what);

/// `parts` with each sharded parameter's part replaced by the whole tensor, gathered from every rank's part (a
/// collective over the shard group: every rank calls it), on the part's device.
std::map<std::string, at::Tensor> wholes_of(const HeldWeights& held, const std::map<std::string, at::Tensor>& parts);

/// wholes_of for copies kept of the parts `sharded` holds now (EMA's and SWA's averages, for their checkpoint
/// state): the parameters `parts` names, trainable ones or all of them.
std::map<std::string, at::Tensor> wholes_of_copies(dist::ShardedState& sharded,
                                                   const std::map<std::string, at::Tensor>& parts);

}  // namespace composer::algorithms::detail
