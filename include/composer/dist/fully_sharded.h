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
// Checkpoints: the strategy answers the State codec's questions through ShardedState (dist/sharded_state.h). With
// Composer's state_dict_type "full" the codec gathers the whole model's weights and optimizer state into one
// process's form, keyed by parameter name (full_optimizer_state_dict), and rank 0 writes it; loading gives each rank
// its part of such a file (keep_gathered_values, shard_optimizer_state_dict), whatever world size wrote it. With
// "sharded" each rank writes and reads its own parts (local_parameters, local_ranges).
#pragma once

#include "composer/dist/parallelism_config.h"
#include "composer/dist/sharded_state.h"
#include "composer/dist/strategy.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace torch::optim {
class Optimizer;
}

namespace composer::dist {

/// The per-rank bytes FSDP keeps between steps, for memory reports.
struct ShardedMemory {
  int64_t parameter_bytes = 0;       ///< the local shards (plus unsharded parameters that need no gradient)
  int64_t full_parameter_bytes = 0;  ///< what a replicated (DDP) rank holds for the same parameters
  int64_t num_units = 0;
  int64_t per_unit_gathered = 0;             ///< units gathered around their own forward and backward
  int64_t peak_training_gathered_bytes = 0;  ///< the most gathered parameter bytes at once in training passes
};

class FullyShardedDataParallel final : public Strategy, public ShardedState {
 public:
  /// `precision_dtype`: the Trainer's precision's dtype, which mixed_precision's presets resolve to. With
  /// activation_checkpointing the wrap policy judges the module inside each checkpoint wrapper, so the units stay
  /// those of the unwrapped model.
  /// `tp`: tensor parallelism within each group of tensor_parallel_degree consecutive ranks (dist/tensor_parallel.h),
  /// applied at setup() before the sharding; FSDP's mesh then spans the data-parallel ranks (those holding the same
  /// tensor-parallel part), and the world size is their count times the degree.
  explicit FullyShardedDataParallel(FSDPOptions options = {}, at::ScalarType precision_dtype = at::kFloat,
                                    std::optional<TPOptions> tp = std::nullopt);
  ~FullyShardedDataParallel() override;
  std::string name() const override { return "fsdp"; }
  int64_t num_replicas() const override;
  /// The ranks that train on different data: the world size over tensor_parallel_degree (a tensor-parallel group's
  /// ranks see the same batches).
  int64_t data_parallel_size() const override;
  int64_t data_parallel_rank() const override;
  bool needs_sharded_data() const override { return data_parallel_size() > 1; }
  /// The tensor-parallel group's size (1 without tensor parallelism).
  int64_t tensor_parallel_degree() const;
  /// Wraps the modules activation_checkpointing picks (nn::CheckpointedLayer), shards the model's trainable
  /// parameters and points `optimizer`'s parameter groups at the local shards. Requires: an optimizer without state
  /// (no step taken, nothing loaded), every trainable parameter in at most one group.
  void setup(torch::nn::Module& model, torch::optim::Optimizer* optimizer) override;
  double mean_batch_samples(double local_samples) override;
  void zero_grad() override;
  void before_backward(bool sync) override;
  void after_backward(bool sync) override;
  void sync_gradients() override;
  BatchTotals reduce_batch(BatchTotals local) override;
  void sum_metric_state(at::Tensor& state) override;
  at::Tensor gather_metric_rows(const at::Tensor& rows) override;
  std::unique_ptr<PhaseScope> enter(Phase phase) override;
  bool shards_state() const override { return options_.sharding_strategy() != ShardingStrategy::NO_SHARD; }
  /// The strategy in effect after setup(): sharding_strategy as the mesh switches it, NO_SHARD for shard groups of
  /// one rank (as torch FSDP on one process).
  ShardingStrategy effective_strategy() const;
  /// The data-parallel mesh after setup() (before it: one shard group of every data-parallel rank).
  DataParallelMesh mesh() const;
  bool holds_gradients() const override { return true; }
  std::optional<at::ScalarType> forward_input_dtype() const override;
  void clip_gradient_norm(double max_norm, double norm_type) override;
  std::map<std::string, std::vector<double>> parameter_sums(const torch::nn::Module& model, size_t width,
                                                            const PartSums& part) override;
  /// True: the model is sharded before a checkpoint loads, so that its whole state loads onto the shards.
  bool setup_before_load() const override { return true; }
  /// Itself once setup() has sharded the model (before it the model and optimizer are whole).
  ShardedState* sharded_state() override { return is_set_up() ? this : nullptr; }
  /// sharded_ckpt_prefix_dir with state_dict_type "sharded".
  std::optional<std::string> sharded_checkpoint_prefix() const override;
  /// load_monolith_rank0_only with state_dict_type "full".
  bool loads_checkpoints_on_rank0_only() const override;
  std::optional<std::string> cuda_graph_obstacle() const override;
  /// gather_full_precision().
  std::unique_ptr<PhaseScope> gather_full_weights() override { return gather_full_precision(); }

  const FSDPOptions& options() const { return options_; }
  /// mixed_precision resolved for the Trainer's precision.
  const MixedPrecisionDtypes& mixed_precision() const;
  /// Gathers every unit in the parameters' own dtype (not param_dtype) until the scope ends, for reading or
  /// writing the weights whole (checkpoints, exports). A collective; call it between steps, on every rank.
  std::unique_ptr<PhaseScope> gather_full_precision();
  ShardedMemory memory() const;
  /// Every parameter's full value (frozen ones too: FSDP shards them alike), in the model's named_parameters() order
  /// (a collective: call it on every rank).
  std::vector<std::pair<std::string, at::Tensor>> gathered_parameters();
  /// Whether setup() has run (before it the model and optimizer are whole, and checkpoints load as without FSDP).
  bool is_set_up() const;

  // ShardedState. Optimizer entries shaped like their parameter are split into (or flattened from) the shards;
  // "step" and other scalars are every parameter's and must agree within a sharding unit. Throws
  // std::invalid_argument for a state dict not in torch's indexed form (LibTorch's own optimizers).
  c10::IValue full_optimizer_state_dict(const c10::IValue& sharded) override;
  c10::IValue shard_optimizer_state_dict(const c10::IValue& full, const EntryParts& parts) const override;
  std::vector<std::pair<std::string, HeldRange>> local_ranges() const override;
  void load_local_parameters(const NamedParts& parts) override;
  NamedParts local_parameters() const override;
  NamedParts held_parameters() override;
  std::vector<std::pair<std::string, at::Tensor>> gather_held_parts(const NamedParts& parts) override;
  c10::IValue local_optimizer_state_dict(const c10::IValue& sharded, EntryParts& parts) const override;
  void keep_gathered_values() override;

 private:
  struct Impl;
  FSDPOptions options_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace composer::dist
