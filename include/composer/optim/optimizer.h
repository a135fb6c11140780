// Optimizer: the base of this library's optimizers. Its state is virtual, so the checkpoint code, module surgery and
// the schedulers work through it instead of knowing each concrete optimizer.
#pragma once

#include <ATen/core/ivalue.h>
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace composer::optim {

class Optimizer : public torch::optim::Optimizer {
 public:
  using torch::optim::Optimizer::Optimizer;

  /// Python's layout: {"state": {index: {name: tensor}}, "param_groups": [{fields..., "params": [indices]}]},
  /// parameters numbered across groups as torch.optim numbers them.
  virtual c10::IValue state_dict() const = 0;
  /// Restores what state_dict() wrote. Throws std::invalid_argument naming the optimizer and what differs (group
  /// count, group sizes, a missing field).
  virtual void load_state_dict(const c10::IValue& state) = 0;
  /// Forgets the state held for `param` (module surgery removed it from the model).
  virtual void erase_state(const at::Tensor& param) = 0;
  /// Each group's learning rate when it was created: what schedulers multiply.
  virtual std::vector<double> initial_lrs() const = 0;

  /// The optimizer a checkpoint names and holds the state of: itself, or what a wrapper (SAMOptimizer) steps, so a
  /// checkpoint restores into the plain optimizer before the wrapper exists again (it is built at AFTER_LOAD).
  virtual const torch::optim::Optimizer& checkpointed() const { return *this; }
  /// The per-parameter metrics this optimizer reports, each an L2 norm (Composer's metric_functions of
  /// DecoupledAdamW: "l2_norm/moment", ...). None by default.
  virtual std::vector<std::string> per_parameter_norm_keys() const { return {}; }
  /// For the elements [begin, end) of `param` flattened (a tensor this optimizer steps: a model parameter, or FSDP's
  /// flat shard holding several), the sum of squares behind each of per_parameter_norm_keys(), in that order; none
  /// when the optimizer holds no state for it or it has no gradient. The sums of every part of a parameter, wherever
  /// they are held, have the norms as square roots (Composer's pre_reduce_metrics and dist_reduce_metrics).
  virtual std::optional<std::vector<double>> per_parameter_squares(const at::Tensor& param, int64_t begin,
                                                                   int64_t end) const {
    (void)param;
    (void)begin;
    (void)end;
    return std::nullopt;
  }
  /// Composer's report_per_parameter_metrics: adds "<key>/<name>" for each per_parameter_norm_keys() key, over the
  /// whole of `param` (a parameter this optimizer steps, whole; `name` is its name in the model).
  void report_per_parameter_metrics(const at::Tensor& param, const std::string& name,
                                    std::map<std::string, double>& metrics) const;

  // CUDA-graph capture (TrainStepOptions::cuda_graph). A recorded step replays its kernels with the arguments they
  // were recorded with, so a capturable optimizer reads what changes from step to step from device tensors: each
  // group's learning rate (the schedulers change it every batch) and the step counts.
  /// Whether set_graph_capture(true) works (DecoupledSGDW, DecoupledAdamW).
  virtual bool supports_graph_capture() const { return false; }
  /// On: every later step() reads each group's lr from a 0-dim tensor on the group's device, which
  /// refresh_graph_scalars() fills, and keeps the step counts on the device (DecoupledAdamW: the fused kernel on
  /// any device). Off: back to host scalars. Throws std::invalid_argument naming the optimizer and the reason where
  /// capture is not supported.
  virtual void set_graph_capture(bool on);
  /// Copies each group's current lr (and what derives from it) into the tensors set_graph_capture made. Call it
  /// outside a capture, before every step() and every replay. No-op when capture is off.
  virtual void refresh_graph_scalars() {}

  /// torch::save / torch::load: the state_dict() travels in the archive, so a saved optimizer keeps its moments.
  void save(torch::serialize::OutputArchive& archive) const override;
  void load(torch::serialize::InputArchive& archive) override;
};

// The same operations on any torch::optim::Optimizer: ours through the virtuals above, LibTorch's through its own
// archive and state map. State keeps a torch::optim::Optimizer so that torch::optim::SGD and friends work too.

/// Ours: state_dict(). LibTorch's: {"torch_archive": uint8 tensor of its torch::save archive}.
c10::IValue optimizer_state_dict(const torch::optim::Optimizer& optimizer);
/// The inverse of optimizer_state_dict. Throws std::invalid_argument when the state does not fit the optimizer.
void load_optimizer_state_dict(torch::optim::Optimizer& optimizer, const c10::IValue& state);
/// Ours: initial_lrs(). LibTorch's: each group's current lr.
std::vector<double> initial_lrs(const torch::optim::Optimizer& optimizer);
/// Ours: checkpointed(). LibTorch's: itself.
const torch::optim::Optimizer& checkpointed_optimizer(const torch::optim::Optimizer& optimizer);
/// Ours: supports_graph_capture(). LibTorch's: false.
bool supports_graph_capture(const torch::optim::Optimizer& optimizer);
/// Drops the state `optimizer` holds for `param`.
void erase_param_state(torch::optim::Optimizer& optimizer, const at::Tensor& param);

}  // namespace composer::optim
