// ShardedState: what a strategy that holds only part of the model's and optimizer's state on each rank tells the
// State codec, so that checkpoints never name a concrete strategy: which part of each parameter this rank holds, how
// to gather and scatter the optimizer's state between this rank's form and one process's name-keyed form, and how to
// write loaded weights back into the shards. Strategy::sharded_state() gives it (nullptr for replicated strategies).
#pragma once

#include "composer/dist/tensor_parallel.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace composer::dist {

/// A tensor of the whole (unsharded) state of which this rank holds a part: `values` are the elements
/// [begin, end) of the row-major flattening of its piece (empty when the rank holds none of it). The piece is the
/// whole tensor, or with `piece` set this rank's tensor-parallel part of it (dist/tensor_parallel.h).
struct LocalPart {
  std::vector<int64_t> shape;  ///< the whole tensor's
  at::ScalarType dtype = at::kFloat;
  int64_t begin = 0;
  int64_t end = 0;
  at::Tensor values;
  std::optional<TensorParallelSplit> piece;
};

/// The range [begin, end) of the row-major elements of a sharded parameter's piece (the whole parameter, or with
/// `piece` set its tensor-parallel part) that this rank holds (empty where it holds none of it), with the
/// parameter's whole shape.
struct HeldRange {
  std::vector<int64_t> shape;
  int64_t begin = 0, end = 0;
  std::optional<TensorParallelSplit> piece;
};

/// The shape of a part's piece: the whole shape, or the tensor-parallel part's.
std::vector<int64_t> piece_shape(const std::vector<int64_t>& shape, const std::optional<TensorParallelSplit>& piece);

/// An optimizer state entry by its path: (parameter name, entry key), e.g. ("fc.weight", "exp_avg").
using EntryPath = std::vector<std::string>;
using NamedParts = std::vector<std::pair<std::string, LocalPart>>;
using EntryParts = std::vector<std::pair<EntryPath, LocalPart>>;

class ShardedState {
 public:
  virtual ~ShardedState() = default;
  /// The range of each sharded parameter (by its name in the model) that this rank holds: what it reads of a
  /// sharded checkpoint. Every replica its own range.
  virtual std::vector<std::pair<std::string, HeldRange>> local_ranges() const = 0;
  /// This rank's part of each sharded parameter, without a collective.
  virtual NamedParts local_parameters() const = 0;
  /// The part of each sharded parameter this rank computes with, as a view of what the optimizer steps (writing it
  /// changes the weights): local_parameters(), but every replica gives its part (under NO_SHARD the whole parameter).
  /// For algorithms that keep elementwise copies of the weights (EMA), sharded like the parameters.
  virtual NamedParts held_parameters() = 0;
  /// The elements of held_parameters()'s part `part` of parameter `name`, taken from `whole`, the parameter's whole
  /// value (a checkpoint's); an undefined tensor when `whole` is not shaped like the parameter. No collective.
  virtual at::Tensor held_part_of(const std::string& name, const at::Tensor& whole, const LocalPart& part) const {
    (void)name;
    if (whole.sizes() != c10::IntArrayRef(part.shape)) return {};
    const at::Tensor piece = part.piece ? part.piece->local_of(whole) : whole;
    return piece.reshape(-1).narrow(0, part.begin, part.end - part.begin);
  }
  /// Whole tensors, by name, from parts shaped like held_parameters()'s (the same names and ranges, any floating
  /// dtype), of every parameter or of the trainable ones only (requires_grad): one all-gather over the shard group,
  /// every rank calling it with its parts.
  virtual std::vector<std::pair<std::string, at::Tensor>> gather_held_parts(const NamedParts& parts) = 0;
  /// Writes parameters given as this rank's parts (each covering its local_ranges() range) into the shards, without
  /// a collective; std::invalid_argument for a part of the wrong shape or naming no sharded parameter.
  virtual void load_local_parameters(const NamedParts& parts) = 0;
  /// After the module's parameters were written while gathered (Strategy::gather_full_weights()): each rank keeps
  /// its part of the new values.
  virtual void keep_gathered_values() = 0;
  /// The optimizer's state dict as one unsharded process holds it, from optimizer_state_dict()'s form over this
  /// rank's shards: keyed by parameter name, each entry whole (gathered from every rank). A collective.
  virtual c10::IValue full_optimizer_state_dict(const c10::IValue& sharded) = 0;
  /// full_optimizer_state_dict without the collective: each entry that is sharded is left out and given in `parts`
  /// as this rank's part.
  virtual c10::IValue local_optimizer_state_dict(const c10::IValue& sharded, EntryParts& parts) const = 0;
  /// The inverse on this rank: a name-keyed state dict of the whole model's optimizer (with some entries given only
  /// as this rank's `parts`, absent from `full`) to this rank's state over its shards, for
  /// load_optimizer_state_dict; std::invalid_argument naming the group or parameter that does not fit.
  virtual c10::IValue shard_optimizer_state_dict(const c10::IValue& full, const EntryParts& parts) const = 0;
};

}  // namespace composer::dist
