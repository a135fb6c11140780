// Strategy: how a run spreads over processes, behind one interface, so the loop units never branch on world size.
// SingleProcess does nothing; DataParallel (DDP) broadcasts rank 0's weights, keeps BatchNorm buffers in step, and
// averages gradients with the bucketed GradientReducer. The hooks around forward and backward (enter) and the
// state-dict questions are where a sharded strategy gathers and releases parameters. The checkpoint code and the
// Trainer ask the strategy what they need to know (sharded_state, setup_before_load, sharded_checkpoint_prefix, ...)
// and never cast it to a concrete strategy: a new strategy answers them in dist/ alone.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace torch::nn {
class Module;
}
namespace torch::optim {
class Optimizer;
}

namespace composer::dist {

class GradientReducer;
class ShardedState;

/// The per-batch values every rank reports: named losses (averaged over ranks), samples and tokens (summed).
struct BatchTotals {
  std::map<std::string, double> losses;
  int64_t samples = 0;
  int64_t tokens = 0;
};

/// Where a loop unit is about to compute, for enter().
enum class Phase { TRAIN_FORWARD, TRAIN_BACKWARD, EVAL_FORWARD, PREDICT_FORWARD };

/// Held for the duration of a phase; its destructor ends it (a sharded strategy frees gathered parameters there).
class PhaseScope {
 public:
  virtual ~PhaseScope() = default;
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  /// "single_process", "ddp", ...
  virtual std::string name() const = 0;
  /// Processes taking part (the world size).
  virtual int64_t num_replicas() const = 0;
  /// Once, before the first step, with the model on its device (DDP: after a checkpoint loads, rank 0's weights
  /// everywhere and the gradient reducer; FSDP: before it loads, the shards and `optimizer`'s groups pointed at
  /// them, so that the checkpoint's whole state loads onto the shards). Requires: the same model on every rank.
  virtual void setup(torch::nn::Module& model, torch::optim::Optimizer* optimizer) = 0;
  /// At the start of every optimisation step (DDP: broadcast buffers, as torch DDP's broadcast_buffers).
  virtual void begin_step() {}
  /// The batch size a microbatch's loss weight divides by: the mean over ranks of the local batch sizes, so that
  /// the gradients averaged across ranks are the sample-weighted mean over the global batch. A collective.
  virtual double mean_batch_samples(double local_samples) = 0;
  /// At the start of every attempt at a batch, with the optimizer's zero_grad: drops gradients the strategy keeps
  /// outside the optimizer's parameters (FSDP: the full-size ones accumulated between microbatches).
  virtual void zero_grad() {}
  /// Around the backward pass of one microbatch; `sync` is true for the step's last microbatch (gradients are
  /// averaged across ranks after it; earlier microbatches only accumulate locally).
  virtual void before_backward(bool /*sync*/) {}
  virtual void after_backward(bool /*sync*/) {}
  /// Averages the accumulated gradients across ranks now, after backward passes that all ran with sync false
  /// (Composer's forced_sync; automatic microbatching uses it so that no gradient collective starts before every
  /// rank has got through its microbatches).
  virtual void sync_gradients() {}
  /// One collective for the batch's losses, samples and tokens.
  virtual BatchTotals reduce_batch(BatchTotals local) = 0;
  /// Sums a metric's state tensor over ranks in place (metrics computed over every rank's data).
  virtual void sum_metric_state(at::Tensor& /*state*/) {}
  /// Every rank's rows of a metric's list state, [n, width], concatenated in rank order (the same on every rank).
  virtual at::Tensor gather_metric_rows(const at::Tensor& rows) { return rows; }
  /// A scope for `phase` (nullptr when there is nothing to do, as for single-process and DDP).
  virtual std::unique_ptr<PhaseScope> enter(Phase /*phase*/) { return nullptr; }
  /// Whether each rank holds a different part of the model and optimizer state (then each rank writes its own
  /// shard of a checkpoint). False for replicated strategies.
  virtual bool shards_state() const { return false; }
  /// Whether the gradients live in the strategy's flat shards (the optimizer's parameters) rather than on the
  /// model's parameters after the backward (FSDP): then gradient clipping goes through clip_gradient_norm.
  virtual bool holds_gradients() const { return false; }
  /// Scales the gradients by min(1, max_norm / (total norm + 1e-6)), the total `norm_type`-norm over every rank's
  /// shard (torch FSDP's clip_grad_norm_). Only for strategies that hold the gradients.
  virtual void clip_gradient_norm(double /*max_norm*/, double /*norm_type*/) {
    throw std::logic_error(name() + ": the gradients are on the model's parameters; clip them there");
  }
  /// What parameter_sums asks of each part of a parameter: `width` numbers for the elements [begin, end) of
  /// `stepped` flattened, the tensor the optimizer steps that holds them (the parameter itself when replicated,
  /// FSDP's flat shard), with its gradient and optimizer state.
  using PartSums = std::function<std::vector<double>(const at::Tensor& stepped, int64_t begin, int64_t end)>;
  /// Sums over the whole of each trainable parameter, by parameter name: `part` for each part of it this rank holds,
  /// added over the ranks (FSDP: one all-reduce over the shard group that every rank joins, a part no rank holds
  /// counting as zeros); replicated strategies hold every parameter whole and call `part` once each, with no
  /// collective. Sums of squares give OptimizerMonitor's per-parameter norms; std::logic_error when `part` returns
  /// other than `width` numbers.
  virtual std::map<std::string, std::vector<double>> parameter_sums(const torch::nn::Module& model, size_t width,
                                                                    const PartSums& part);
  /// How many ranks answer true, from this rank's `local` answer (one small collective over all ranks when
  /// num_replicas() > 1). The loops ask "do you have another batch?" before each batch, so that no rank starts a step
  /// whose collectives another rank, out of data, would never join.
  virtual int64_t count_ranks_with(bool local);
  /// The ranks that train on different data, and this rank's place among them (a data loader's num_replicas and
  /// rank): every rank for data-parallel strategies; with tensor parallelism, a tensor-parallel group's ranks share
  /// one place and see the same batches.
  virtual int64_t data_parallel_size() const { return num_replicas(); }
  virtual int64_t data_parallel_rank() const;
  /// Whether the training data must be split across ranks (DataLoader::is_distributed()).
  virtual bool needs_sharded_data() const { return data_parallel_size() > 1; }
  /// The dtype the floating fields of the batch the model's forward sees are cast to (FSDP's param_dtype, as torch
  /// FSDP casts the root's forward inputs); unset: as they are. The loss sees the batch uncast.
  virtual std::optional<at::ScalarType> forward_input_dtype() const { return std::nullopt; }

  // What checkpoints and the Trainer need to know of how the state is laid out; replicated strategies answer with
  // the defaults (every rank holds everything; one file, written by rank 0).
  /// Whether setup() runs before a checkpoint loads (a sharded strategy: the checkpoint's whole state then loads onto
  /// this rank's parts, whatever world size wrote it), rather than after it (DDP: rank 0's loaded weights
  /// broadcast). A model-changing algorithm recreated from a checkpoint cannot join a run set up first.
  virtual bool setup_before_load() const { return false; }
  /// The model's and optimizer's state as this rank holds part of it, once setup() has split it; nullptr when every
  /// rank holds it whole (the codec then reads and writes the module and optimizer directly).
  virtual ShardedState* sharded_state() { return nullptr; }
  /// Gathers the whole weights, in the parameters' own dtype, into the module until the scope ends (for reading or
  /// writing them: checkpoints, exports); a collective every rank calls between steps. nullptr when the module holds
  /// them already.
  virtual std::unique_ptr<PhaseScope> gather_full_weights() { return nullptr; }
  /// Set: checkpoints are directories with one file per rank (PyTorch's Distributed Checkpoint layout), named by this
  /// pattern ({epoch}, {batch}, ... as in filenames); none: one file, written by rank 0.
  virtual std::optional<std::string> sharded_checkpoint_prefix() const { return std::nullopt; }
  /// Whether rank 0 alone reads a one-file checkpoint and hands its contents to the other ranks.
  virtual bool loads_checkpoints_on_rank0_only() const { return false; }
  /// Why a step cannot be recorded as a CUDA graph under this strategy (none: it can, as far as it knows).
  virtual std::optional<std::string> cuda_graph_obstacle() const { return std::nullopt; }
};

/// For Strategy::parameter_sums parts: the squared L2 norm of the elements [begin, end) of `t` flattened, computed in
/// t's dtype.
double squared_norm(const at::Tensor& t, int64_t begin, int64_t end);
/// std::logic_error unless `values` holds `width` numbers (what a PartSums must give).
void check_part_width(const std::vector<double>& values, size_t width);

/// The null strategy of a one-process run.
class SingleProcess final : public Strategy {
 public:
  std::string name() const override { return "single_process"; }
  int64_t num_replicas() const override { return 1; }
  void setup(torch::nn::Module&, torch::optim::Optimizer*) override {}
  double mean_batch_samples(double local_samples) override { return local_samples; }
  BatchTotals reduce_batch(BatchTotals local) override { return local; }
};

/// Distributed data parallel over the initialised process group (dist::initialize_dist first).
class DataParallel final : public Strategy {
 public:
  /// `bucket_bytes`: the gradient reducer's bucket size (torch DDP's bucket_cap_mb, 25 MB).
  explicit DataParallel(int64_t bucket_bytes = 25 * 1024 * 1024);
  ~DataParallel() override;
  std::string name() const override { return "ddp"; }
  int64_t num_replicas() const override;
  void setup(torch::nn::Module& model, torch::optim::Optimizer* optimizer) override;
  void begin_step() override;
  double mean_batch_samples(double local_samples) override;
  void before_backward(bool sync) override;
  void after_backward(bool sync) override;
  void sync_gradients() override;
  BatchTotals reduce_batch(BatchTotals local) override;
  void sum_metric_state(at::Tensor& state) override;
  at::Tensor gather_metric_rows(const at::Tensor& rows) override;

 private:
  int64_t bucket_bytes_;
  std::vector<at::Tensor> buffers_;
  std::unique_ptr<GradientReducer> reducer_;
};

/// The collectives every data-parallel strategy shares: the mean of `local_samples` over the ranks, and
/// reduce_batch's one all-reduce (losses averaged, samples and tokens summed).
double mean_over_ranks(double local_samples);
BatchTotals reduce_over_ranks(BatchTotals local);

/// SingleProcess for a world size of 1, else DataParallel.
std::unique_ptr<Strategy> default_strategy();

}  // namespace composer::dist
