// FullyShardedDataParallel: Composer's FSDP (parallelism_config={'fsdp': {...}}) over the c10d collectives. Each
// sharding unit's trainable parameters (one unit per submodule the wrap policy picks, the root holding the rest) are
// one flat buffer per optimizer parameter group, split evenly over the ranks (padded to a multiple of the world
// size); the optimizer steps on the local shard only, so parameters, gradients and optimizer state between steps
// take 1/N of the memory on each rank. Before a forward (and, for FULL_SHARD, again before the backward) the shards
// are all-gathered into the module's parameters; after the backward the flat gradient is averaged over the ranks and
// each keeps its slice (an all-reduce and a slice, as Gloo has no reduce-scatter: twice a reduce-scatter's traffic).
//
// Outside a forward or backward the module's sharded parameters hold no values (shape [0]): read the weights through
// gathered_parameters(), not the module, while training.
#pragma once

#include "composer/dist/strategy.h"

#include <ATen/core/Tensor.h>

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
};
std::string to_string(ShardingStrategy s);
/// "FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD"; std::invalid_argument naming `key` and the choices otherwise
/// (HYBRID_SHARD: a clear "not supported yet").
ShardingStrategy sharding_strategy_from_string(const std::string& text, const std::string& key);

/// Which submodules are sharding units: called with each submodule's dotted name and the module.
using WrapPolicy = std::function<bool(const std::string& name, const torch::nn::Module& module)>;
/// The default: every transformer block (GPTBlock, BertLayer) and every ResNet block (BasicBlock,
/// ResNetBottleneck) of the model zoo, matched by class name.
bool default_wrap_policy(const std::string& name, const torch::nn::Module& module);

struct FSDPOptions {
  /// How much is sharded (Composer's default FULL_SHARD).
  TORCH_ARG(ShardingStrategy, sharding_strategy) = ShardingStrategy::FULL_SHARD;
  /// Broadcast rank 0's parameters and buffers before sharding (Composer's default false: every rank must then
  /// build the same initial weights, as with the same seed).
  TORCH_ARG(bool, sync_module_states) = false;
  /// Split the model into units by wrap_policy (false: the whole model is one unit).
  TORCH_ARG(bool, auto_wrap) = true;
  /// The units when auto_wrap is on; unset: default_wrap_policy.
  TORCH_ARG(WrapPolicy, wrap_policy);
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
};

class FullyShardedDataParallel final : public Strategy {
 public:
  explicit FullyShardedDataParallel(FSDPOptions options = {});
  ~FullyShardedDataParallel() override;
  std::string name() const override { return "fsdp"; }
  int64_t num_replicas() const override;
  /// Shards the model's trainable parameters and points `optimizer`'s parameter groups at the local shards.
  /// Requires: an optimizer without state (no step taken, nothing loaded), every trainable parameter in at most
  /// one group.
  void setup(torch::nn::Module& model, torch::optim::Optimizer* optimizer) override;
  double mean_batch_samples(double local_samples) override;
  void zero_grad() override;
  void after_backward(bool sync) override;
  void sync_gradients() override;
  BatchTotals reduce_batch(BatchTotals local) override;
  void sum_metric_state(at::Tensor& state) override;
  std::unique_ptr<PhaseScope> enter(Phase phase) override;
  bool shards_state() const override { return options_.sharding_strategy() != ShardingStrategy::NO_SHARD; }
  bool holds_gradients() const override { return true; }
  void clip_gradient_norm(double max_norm, double norm_type) override;

  const FSDPOptions& options() const { return options_; }
  ShardedMemory memory() const;
  /// Every trainable parameter's full value, in the model's named_parameters() order (a collective: call it on
  /// every rank).
  std::vector<std::pair<std::string, at::Tensor>> gathered_parameters();

 private:
  struct Impl;
  FSDPOptions options_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace composer::dist
