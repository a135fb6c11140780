// The State codec: State to and from the "state" dict of a checkpoint, in Composer's keys (model, optimizers,
// algorithms, callbacks, scaler, timestamp, train_metrics, rank_zero_seed, run_name, metadata). Plain tensors and
// primitives, so Python's torch.load reads it as a dict.
#pragma once

#include "composer/dist/sharded_state.h"

#include <ATen/core/ivalue.h>
#include <c10/core/ScalarType.h>

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace composer {

struct State;

/// The serialisable part of `state`. The optimizer's state is keyed by parameter name, as Composer keys it. Under a
/// strategy that shards the state (FSDP, once it has sharded the model: Strategy::sharded_state()) the weights and
/// optimizer state are gathered whole from every rank, as one process would hold them (Composer's state_dict_type
/// "full"): then it is a collective (state_dict_is_collective).
c10::IValue state_dict(const State& state);
/// Whether state_dict(state) must be called on every rank at once (a sharded strategy), not by rank 0 alone.
bool state_dict_is_collective(const State& state);

/// A tensor of state_dict() that each rank holds only part of (a sharded strategy), by its path in the dict.
struct ShardedEntry {
  std::vector<std::string> path;  ///< e.g. {"model", "fc.weight"}, {"optimizers", "DecoupledAdamW", "state", ...}
  dist::LocalPart part;
};
/// The part of a tensor a rank reads: the elements [begin, end) of its piece's row-major flattening, the piece the
/// whole tensor or (with `piece` set) this rank's tensor-parallel part of it.
struct WantedPart {
  int64_t begin = 0, end = 0;
  std::optional<dist::TensorParallelSplit> piece;
  WantedPart(std::pair<int64_t, int64_t> range, std::optional<dist::TensorParallelSplit> in = std::nullopt)
      : begin(range.first), end(range.second), piece(std::move(in)) {}
};
/// Which part of a tensor of a checkpoint's "state" this rank needs, by the tensor's path there and its whole shape,
/// or none for the whole tensor.
using PartsWanted =
    std::function<std::optional<WantedPart>(const std::vector<std::string>& path, const std::vector<int64_t>& shape)>;
/// Under a sharded strategy (once it has sharded the model): this rank's part of each sharded parameter and of each
/// optimizer state entry shaped like one (what local_state_dict gives it, every replica its own). Otherwise empty
/// (read whole).
PartsWanted local_parts_wanted(const State& state);

/// state_dict() as this rank holds it, without gathering (for sharded checkpoints): the dict leaves out the
/// tensors the strategy shards, and `sharded` gives this rank's part of each. Replicated: state_dict(), no parts.
c10::IValue local_state_dict(const State& state, std::vector<ShardedEntry>& sharded);
/// Restores what state_dict() wrote. The model loads first (strict_model: every key and shape must match); entries
/// this State has no owner for (an algorithm or callback the run lacks, Composer's extra keys) are skipped; a missing
/// optimizer state is an error naming it. Under a sharded strategy each rank loads its part of the whole state,
/// whatever world
/// size saved it. `parts`: tensors this rank read only in part (a sharded checkpoint read with local_parts_wanted),
/// left out of `saved`; they load into this rank's shards without gathering. Throws std::invalid_argument.
void load_state_dict(State& state, const c10::IValue& saved, bool strict_model = true,
                     const std::vector<ShardedEntry>& parts = {});

/// What a checkpoint's "state" dict holds, read by the codec's keys without building a State (composer-cpp inspect
/// prints it). Entries a checkpoint lacks stay empty (unset where "absent" and "empty" differ).
struct StateSummary {
  std::optional<std::string> run_name;
  std::vector<std::pair<std::string, c10::IValue>> timestamp;  ///< the Timestamp's fields (epoch, batch, ...)
  std::vector<std::pair<std::string, c10::IValue>> metadata;   ///< versions, device, precision, schedulers, ...
  /// Each algorithm's repr (how to re-create it; its name when the checkpoint has no repr); unset without the key.
  std::optional<std::vector<std::string>> algorithms;
  std::optional<std::vector<std::string>> optimizers;  ///< the optimizers' class names
  struct ModelTensor {
    std::string name;
    std::vector<int64_t> shape;
    at::ScalarType dtype = at::kFloat;
  };
  std::vector<ModelTensor> model;
  int64_t model_elements() const;
};
/// Throws std::invalid_argument when `saved` is not a state dict (no "model" dict).
StateSummary summarize_state(const c10::IValue& saved);

}  // namespace composer
