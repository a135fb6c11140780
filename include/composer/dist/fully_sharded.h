// FullyShardedDataParallel: Composer's FSDP (parallelism_config={'fsdp': {...}}) over the c10d collectives. Each
// sharding unit's trainable parameters (one unit per submodule the wrap policy picks, the root holding the rest) are
// one flat buffer per optimizer parameter group, split evenly over the ranks (padded to a multiple of the world
// size); the optimizer steps on the local shard only, so parameters, gradients and optimizer state between steps
// take 1/N of the memory on each rank.
//
// A unit that is a composer::nn::Layer called through a composer::nn::Composite (the model zoo's blocks) is gathered
// around its own forward and backward, as torch FSDP does with its hooks: all-gathered just before its forward,
// freed after it (FULL_SHARD), gathered again just before its backward, and after its backward its gradient is
// reduce-scattered in the background and its weights freed; the next unit's all-gather is prefetched
// (backward_prefetch, forward_prefetch). Other units, and the root's own parameters, are gathered for the whole forward
// and backward.
//
// Outside a forward or backward the module's sharded parameters hold no values (shape [0]): read the weights through
// gathered_parameters(), not the module, while training.
//
// Checkpoints (Composer's state_dict_type "full"): the state codec gathers the whole model's weights and optimizer
// state into one process's form, keyed by parameter name (full_optimizer_state_dict), and rank 0 writes it; loading
// gives each rank its part of such a file (keep_gathered_values, shard_optimizer_state_dict), whatever world size
// wrote it.
#pragma once

#include "composer/dist/strategy.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <torch/arg.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace torch::optim {
class Optimizer;
}

namespace composer::dist {

/// Composer's sharding_strategy (torch's ShardingStrategy names).
enum class ShardingStrategy {
  FULL_SHARD,     ///< parameters, gradients and optimizer state sharded; weights gathered for forward and backward
  SHARD_GRAD_OP,  ///< as FULL_SHARD, but the weights gathered for the forward stay until the backward is done
  NO_SHARD,       ///< everything replicated, gradients all-reduced (DDP through the FSDP code path)
  /// FULL_SHARD within each shard group of data_parallel_shard_degree ranks, the groups replicas of each other:
  /// gradients reduce-scattered in the group, then all-reduced across the replicas (needs
  /// data_parallel_replicate_degree, as in Composer)
  HYBRID_SHARD,
  HYBRID_SHARD_ZERO2,  ///< "_HYBRID_SHARD_ZERO2": SHARD_GRAD_OP within each shard group, replicated across them
};
std::string to_string(ShardingStrategy s);
/// "FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD", "_HYBRID_SHARD_ZERO2"; std::invalid_argument naming
/// `key` and the choices otherwise.
ShardingStrategy sharding_strategy_from_string(const std::string& text, const std::string& key);

/// Composer's FSDP device mesh: `replicate` shard groups of `shard` consecutive ranks (rank r in group r / shard).
struct DataParallelMesh {
  int64_t replicate = 1;
  int64_t shard = 1;
  /// As Composer sizes it: (data_parallel_replicate_degree, data_parallel_shard_degree) when the replicate degree is
  /// given, else (data_parallel_shard_degree); one -1 takes what `world` leaves. std::invalid_argument naming the
  /// keys when two are -1 or the product is not `world`.
  static DataParallelMesh resolve(int64_t shard_degree, std::optional<int64_t> replicate_degree, int64_t world);
  /// A degree is a positive number of ranks or -1; std::invalid_argument naming `key` otherwise.
  static void check_degree(int64_t degree, const std::string& key);
  /// Composer's switch between strategies by the mesh: with a replicate degree (a 2-D mesh) FULL_SHARD becomes
  /// HYBRID_SHARD and SHARD_GRAD_OP _HYBRID_SHARD_ZERO2; without one the hybrid strategies become FULL_SHARD and
  /// SHARD_GRAD_OP. `switched` says whether it did (Composer warns). NO_SHARD with a replicate degree is an
  /// std::invalid_argument (all ranks are replicas already).
  static ShardingStrategy strategy_for(ShardingStrategy s, bool two_dimensional, bool* switched = nullptr);
};

/// Composer's backward_prefetch (torch's BackwardPrefetch): when the next unit's all-gather starts in the backward.
enum class BackwardPrefetch {
  BACKWARD_PRE,   ///< when a unit's backward begins (its weights gathered), before its gradients are computed
  BACKWARD_POST,  ///< when a unit's gradients are done (its weights freed): less memory, less overlap
  NONE,           ///< no prefetch: each unit gathers when its backward reaches it
};
std::string to_string(BackwardPrefetch p);
/// "BACKWARD_PRE", "BACKWARD_POST", "NONE" (any case); std::invalid_argument naming `key` and the choices otherwise.
BackwardPrefetch backward_prefetch_from_string(const std::string& text, const std::string& key);

/// The dtypes of Composer's mixed_precision (torch's MixedPrecision); unset: as the parameters and buffers are.
struct MixedPrecisionDtypes {
  std::optional<at::ScalarType> param_dtype;   ///< the gathered weights and the forward's floating inputs
  std::optional<at::ScalarType> reduce_dtype;  ///< the gradient reduction (unset with param_dtype set: param_dtype)
  std::optional<at::ScalarType> buffer_dtype;  ///< the floating buffers during forward passes
};

/// Composer's mixed_precision: a preset ("DEFAULT": weights and buffers in the precision's dtype, reduction in
/// float32; "PURE": all three in the precision's dtype; "FULL": no casts) or explicit dtypes (Composer's dict).
struct FSDPMixedPrecision {
  std::string preset = "DEFAULT";  ///< DEFAULT, PURE, FULL (any case); "" when `dtypes` are given
  MixedPrecisionDtypes dtypes;
  static FSDPMixedPrecision of(const std::string& preset) { return {preset, {}}; }
  static FSDPMixedPrecision custom(MixedPrecisionDtypes dtypes) { return {"", dtypes}; }
};
/// The dtypes for the Trainer's precision (its dtype: float32 for fp32, bfloat16 for amp_bf16, float16 for amp_fp16),
/// as Composer's get_mixed_precision resolves them; std::invalid_argument naming `key` for an unknown preset.
MixedPrecisionDtypes resolve_mixed_precision(const FSDPMixedPrecision& mp, at::ScalarType precision_dtype,
                                             const std::string& key = "mixed_precision");
/// Composer's dtype names: float32/fp32/torch.float32, float16/half/fp16/amp_fp16/amp, bfloat16/bf16/amp_bf16/...,
/// and float64/fp64/double (not in Composer's list; for float64 models); std::invalid_argument naming `key`.
at::ScalarType mixed_precision_dtype_from_string(const std::string& text, const std::string& key);

/// Which submodules are sharding units: called with each submodule's dotted name and the module.
using WrapPolicy = std::function<bool(const std::string& name, const torch::nn::Module& module)>;
/// The default: every transformer block (GPTBlock, BertLayer, LlamaDecoderLayer) and every ResNet block (BasicBlock,
/// ResNetBottleneck) of the model zoo, matched by class name.
bool default_wrap_policy(const std::string& name, const torch::nn::Module& module);

struct FSDPOptions {
  /// How much is sharded (Composer's default FULL_SHARD).
  TORCH_ARG(ShardingStrategy, sharding_strategy) = ShardingStrategy::FULL_SHARD;
  /// Composer's data_parallel_shard_degree: the ranks each shard group spans (-1: what the world size and the
  /// replicate degree leave).
  TORCH_ARG(int64_t, data_parallel_shard_degree) = -1;
  /// Composer's data_parallel_replicate_degree: set, the shard groups replicate each other (HYBRID_SHARD; -1: what
  /// the world size and the shard degree leave); unset, one shard group spans every rank.
  TORCH_ARG(std::optional<int64_t>, data_parallel_replicate_degree);
  /// Broadcast rank 0's parameters and buffers before sharding (Composer's default false: every rank must then
  /// build the same initial weights, as with the same seed).
  TORCH_ARG(bool, sync_module_states) = false;
  /// Split the model into units by wrap_policy (false: the whole model is one unit).
  TORCH_ARG(bool, auto_wrap) = true;
  /// The units when auto_wrap is on; unset: default_wrap_policy.
  TORCH_ARG(WrapPolicy, wrap_policy);
  /// Recompute each checkpointed module's activations in the backward pass instead of keeping them (Composer's
  /// activation_checkpointing; the Trainer wraps the modules in nn::CheckpointedLayer before sharding).
  TORCH_ARG(bool, activation_checkpointing) = false;
  /// Composer's activation_cpu_offload, with activation_checkpointing: the input each checkpointed module keeps for
  /// its recomputation waits in host memory (nn::CheckpointedLayer's offload_input). Alone it is an error: Composer
  /// then offloads every saved activation through PyTorch's saved-tensor hooks, which LibTorch takes as Python
  /// objects only.
  TORCH_ARG(bool, activation_cpu_offload) = false;
  /// Composer's activation_checkpointing_reentrant (PyTorch's two implementations); both values recompute the same
  /// way here (nn::CheckpointedLayer, which also gives gradients when a module's input needs none).
  TORCH_ARG(bool, activation_checkpointing_reentrant) = true;
  /// The modules to checkpoint (Composer asks the model's activation_checkpointing_fn); unset: the sharding units
  /// (wrap_policy, or default_wrap_policy).
  TORCH_ARG(WrapPolicy, activation_checkpointing_policy);
  /// Composer's state_dict_type: "full" (one file, written by rank 0) or "sharded" (a directory in PyTorch's
  /// Distributed Checkpoint layout, one file per rank; checkpoint/distributed_checkpoint.h).
  TORCH_ARG(std::string, state_dict_type) = "full";
  /// Where a sharded checkpoint goes inside save_folder (Composer's default; {epoch}, {batch}, ... as in filenames).
  TORCH_ARG(std::string, sharded_ckpt_prefix_dir) = "ep{epoch}-ba{batch}";
  /// With state_dict_type "full": only rank 0 reads a monolithic checkpoint (load_path, autoresume) and hands its
  /// contents to the other ranks over the process group, so the file need only be readable on rank 0. Ignored with
  /// "sharded" checkpoints, as Composer ignores it.
  TORCH_ARG(bool, load_monolith_rank0_only) = false;
  /// Start the next unit's all-gather in the backward (Composer's default BACKWARD_POST).
  TORCH_ARG(BackwardPrefetch, backward_prefetch) = BackwardPrefetch::BACKWARD_POST;
  /// Start the next unit's all-gather (in the previous forward's order) when a unit's forward begins (Composer's
  /// default false).
  TORCH_ARG(bool, forward_prefetch) = false;
  /// Composer's mixed_precision (default DEFAULT: with precision fp32 nothing is cast; a float64 model under
  /// DEFAULT computes in float32, as under Composer: give FULL to keep float64).
  TORCH_ARG(FSDPMixedPrecision, mixed_precision);
  /// torch's limit on all-gathers in flight (Composer's default true). Accepted either way: at most one unit is ever
  /// prefetched ahead here, which is within torch's limit of two.
  TORCH_ARG(bool, limit_all_gathers) = true;
};

/// "full" or "sharded"; std::invalid_argument naming `key` otherwise.
void check_state_dict_type(const std::string& text, const std::string& key);

/// A tensor of the whole (unsharded) state of which this rank holds a part: `values` are the elements
/// [begin, end) of its row-major flattening (empty when the rank holds none of it).
struct LocalPart {
  std::vector<int64_t> shape;
  at::ScalarType dtype = at::kFloat;
  int64_t begin = 0;
  int64_t end = 0;
  at::Tensor values;
};

/// Composer's parallelism_config: {fsdp: {...}} (tensor parallelism is not built).
struct ParallelismConfig {
  /// Set: train with FullyShardedDataParallel.
  TORCH_ARG(std::optional<FSDPOptions>, fsdp);
};

/// The per-rank bytes FSDP keeps between steps, for memory reports.
struct ShardedMemory {
  int64_t parameter_bytes = 0;       ///< the local shards (plus unsharded parameters that need no gradient)
  int64_t full_parameter_bytes = 0;  ///< what a replicated (DDP) rank holds for the same parameters
  int64_t num_units = 0;
  int64_t per_unit_gathered = 0;             ///< units gathered around their own forward and backward
  int64_t peak_training_gathered_bytes = 0;  ///< the most gathered parameter bytes at once in training passes
};

class FullyShardedDataParallel final : public Strategy {
 public:
  /// `precision_dtype`: the Trainer's precision's dtype, which mixed_precision's presets resolve to.
  explicit FullyShardedDataParallel(FSDPOptions options = {}, at::ScalarType precision_dtype = at::kFloat);
  ~FullyShardedDataParallel() override;
  std::string name() const override { return "fsdp"; }
  int64_t num_replicas() const override;
  /// Shards the model's trainable parameters and points `optimizer`'s parameter groups at the local shards.
  /// Requires: an optimizer without state (no step taken, nothing loaded), every trainable parameter in at most
  /// one group.
  void setup(torch::nn::Module& model, torch::optim::Optimizer* optimizer) override;
  double mean_batch_samples(double local_samples) override;
  void zero_grad() override;
  void before_backward(bool sync) override;
  void after_backward(bool sync) override;
  void sync_gradients() override;
  BatchTotals reduce_batch(BatchTotals local) override;
  void sum_metric_state(at::Tensor& state) override;
  std::unique_ptr<PhaseScope> enter(Phase phase) override;
  bool shards_state() const override { return options_.sharding_strategy() != ShardingStrategy::NO_SHARD; }
  /// The strategy in effect after setup(): sharding_strategy as the mesh switches it, NO_SHARD for shard groups of
  /// one rank (as torch FSDP on one process).
  ShardingStrategy effective_strategy() const;
  /// The mesh after setup() (before it: one shard group of every rank).
  DataParallelMesh mesh() const;
  bool holds_gradients() const override { return true; }
  std::optional<at::ScalarType> forward_input_dtype() const override;
  void clip_gradient_norm(double max_norm, double norm_type) override;
  std::map<std::string, double> gradient_norms(const torch::nn::Module& model) override;

  const FSDPOptions& options() const { return options_; }
  /// mixed_precision resolved for the Trainer's precision.
  const MixedPrecisionDtypes& mixed_precision() const;
  /// Gathers every unit in the parameters' own dtype (not param_dtype) until the scope ends, for reading or
  /// writing the weights whole (checkpoints, exports). A collective; call it between steps, on every rank.
  std::unique_ptr<PhaseScope> gather_full_precision();
  ShardedMemory memory() const;
  /// Every trainable parameter's full value, in the model's named_parameters() order (a collective: call it on
  /// every rank).
  std::vector<std::pair<std::string, at::Tensor>> gathered_parameters();
  /// Whether setup() has run (before it the model and optimizer are whole, and checkpoints load as without FSDP).
  bool is_set_up() const;

  /// The optimizer's state dict as one unsharded process holds it, from optimizer_state_dict()'s indexed form over
  /// the shards: keyed by parameter name, each parameter's state tensors whole (gathered from every rank), each
  /// group's "params" the names of its parameters. Entries shaped like the shard are split per parameter; "step"
  /// and other scalars are every parameter's. A collective: call it on every rank. Throws std::invalid_argument for
  /// a state dict not in torch's indexed form (LibTorch's own optimizers).
  c10::IValue full_optimizer_state_dict(const c10::IValue& sharded);
  /// The inverse on this rank: a name-keyed state dict of the whole model's optimizer (as full_optimizer_state_dict
  /// gives, or one process's, or Composer's) to this rank's indexed state over its shards, for
  /// load_optimizer_state_dict. Entries shaped like their parameter are flattened into the shard; "step" and other
  /// scalars must agree within a sharding unit. Throws std::invalid_argument naming the group or parameter that
  /// does not fit.
  c10::IValue shard_optimizer_state_dict(const c10::IValue& full) const;
  /// The same, with some entries given only as this rank's part (a sharded checkpoint read in part): `parts` by
  /// their path (parameter name, entry key), each covering local_ranges()' range of its parameter; those entries are
  /// absent from `full`.
  c10::IValue shard_optimizer_state_dict(
      const c10::IValue& full, const std::vector<std::pair<std::vector<std::string>, LocalPart>>& parts) const;
  /// The range [begin, end) of each sharded parameter's row-major elements that this rank's shard holds (every
  /// replica its own range; empty where the rank holds none of it): what it reads of a sharded checkpoint.
  struct HeldRange {
    std::vector<int64_t> shape;  ///< the parameter's
    int64_t begin = 0, end = 0;
  };
  std::vector<std::pair<std::string, HeldRange>> local_ranges() const;
  /// Writes parameters given as this rank's parts (each covering its local_ranges() range) into the shards, without
  /// a collective. Throws std::invalid_argument for a part whose shape is not its parameter's or that names no
  /// sharded parameter.
  void load_local_parameters(const std::vector<std::pair<std::string, LocalPart>>& parts);
  /// This rank's part of each sharded parameter (trainable ones, named as in the model), without a collective.
  std::vector<std::pair<std::string, LocalPart>> local_parameters() const;
  /// full_optimizer_state_dict without the collective: the same dict, but each entry that is sharded is left out
  /// of it and given in `parts` as this rank's part, by its path (parameter name, entry key).
  c10::IValue local_optimizer_state_dict(const c10::IValue& sharded,
                                         std::vector<std::pair<std::vector<std::string>, LocalPart>>& parts) const;
  /// After the module's parameters were written while gathered (a checkpoint loaded inside an enter() scope): each
  /// rank keeps its part of the new values in its shards.
  void keep_gathered_values();

 private:
  struct Impl;
  FSDPOptions options_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace composer::dist
