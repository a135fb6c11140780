// ParallelismConfig: Composer's parallelism_config, how a run spreads over processes, and the options of each
// strategy it names (FSDPOptions: Composer's FSDP config keys, names and defaults). make_strategy() turns it into
// the dist::Strategy the Trainer runs with, so that the Trainer never names a concrete strategy.
#pragma once

#include "composer/dist/tensor_parallel.h"

#include <ATen/core/ScalarType.h>

#include <torch/arg.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace torch::nn {
class Module;
}

namespace composer::dist {

class Strategy;

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

 public:
  /// The keys a config sets (Composer's FSDP config names; the YAML's parallelism_config.fsdp section and the docs
  /// table in docs/fsdp.md come from this list). wrap_policy and activation_checkpointing_policy are functions, set
  /// in code only. Reading and printing the enums and mixed_precision: core/parallelism_fields.h.
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("sharding_strategy", self.sharding_strategy_,
          "FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD or _HYBRID_SHARD_ZERO2 (any case)");
    visit("data_parallel_shard_degree", self.data_parallel_shard_degree_,
          "ranks per shard group; -1: what the world size and the replicate degree leave");
    visit("data_parallel_replicate_degree", self.data_parallel_replicate_degree_,
          "set: shard groups replicating each other (HYBRID_SHARD; -1 fills); None: one shard group");
    visit("sync_module_states", self.sync_module_states_, "broadcast rank 0's weights and buffers before sharding");
    visit("auto_wrap", self.auto_wrap_, "split the model into units (the default policy's blocks); false: one unit");
    visit("activation_checkpointing", self.activation_checkpointing_,
          "recompute each unit's activations in the backward");
    visit("activation_checkpointing_reentrant", self.activation_checkpointing_reentrant_,
          "accepted either way (one recomputation here)");
    visit("activation_cpu_offload", self.activation_cpu_offload_,
          "with activation_checkpointing: the kept inputs wait in host memory");
    visit("state_dict_type", self.state_dict_type_,
          "full (one file by rank 0) or sharded (a DCP directory, a file per rank)");
    visit("sharded_ckpt_prefix_dir", self.sharded_ckpt_prefix_dir_,
          "a sharded checkpoint's directory name in save_folder");
    visit("load_monolith_rank0_only", self.load_monolith_rank0_only_,
          "with full checkpoints: rank 0 alone reads the file and sends its contents");
    visit("backward_prefetch", self.backward_prefetch_,
          "BACKWARD_PRE, BACKWARD_POST or NONE: when the next unit's gather starts in the backward");
    visit("forward_prefetch", self.forward_prefetch_, "start the next unit's gather when a unit's forward begins");
    visit("mixed_precision", self.mixed_precision_,
          "DEFAULT, PURE, FULL, or {param_dtype, reduce_dtype, buffer_dtype}");
    visit("limit_all_gathers", self.limit_all_gathers_, "accepted either way (at most one unit is prefetched)");
  }
};

/// "full" or "sharded"; std::invalid_argument naming `key` otherwise.
void check_state_dict_type(const std::string& text, const std::string& key);

/// Composer's parallelism_config: {fsdp: {...}, tp: {...}}.
struct ParallelismConfig {
  /// Set: train with FullyShardedDataParallel.
  TORCH_ARG(std::optional<FSDPOptions>, fsdp);
  /// Set (with fsdp, as Composer requires): tensor parallelism inside FSDP's mesh; a degree of 1 is none.
  TORCH_ARG(std::optional<TPOptions>, tp);

 public:
  /// The key of the sharded strategy's section ("parallelism_config.fsdp"), none when every rank holds the whole
  /// model (DDP or one process): for errors about what a sharded run cannot do.
  std::optional<std::string> sharded_section() const;
  /// The checks each section's options need by themselves; std::invalid_argument naming the key.
  void validate() const;
};

/// The strategy `config` names for a run whose precision computes in `precision_dtype`: FSDP for an fsdp section,
/// else default_strategy() (one process, or DDP).
std::unique_ptr<Strategy> make_strategy(const ParallelismConfig& config, at::ScalarType precision_dtype);

}  // namespace composer::dist
