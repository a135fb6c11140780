// DecoupledSGDW: SGD whose weight decay follows the learning-rate schedule (Composer's optim.DecoupledSGDW).
#pragma once

#include <torch/arg.h>
#include "composer/optim/optimizer.h"

#include <torch/optim/optimizer.h>

#include <unordered_map>

namespace composer::optim {

struct DecoupledSGDWOptions : torch::optim::OptimizerCloneableOptions<DecoupledSGDWOptions> {
  explicit DecoupledSGDWOptions(double lr = 0.1) : lr_(lr) {}
  /// Learning rate (schedulers change it; initial_lr keeps the first value).
  TORCH_ARG(double, lr);
  TORCH_ARG(double, momentum) = 0.0;
  TORCH_ARG(double, dampening) = 0.0;
  /// Decay is p *= 1 - (lr / initial_lr) * weight_decay: it follows the schedule, not the raw lr.
  TORCH_ARG(double, weight_decay) = 0.0;
  TORCH_ARG(bool, nesterov) = false;
  /// The lr when the group was created (set by the optimizer; <= 0 means "use lr").
  TORCH_ARG(double, initial_lr) = -1.0;

 public:
  double get_lr() const override { return lr_; }
  void set_lr(const double lr) override { lr_ = lr; }
  /// Throws std::invalid_argument naming the bad field.
  void validate() const;
  /// The field list (core/fields.h): the registry's hyperparameters, their defaults and docs.
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("lr", self.lr_, "learning rate");
    visit("momentum", self.momentum_, "momentum factor");
    visit("dampening", self.dampening_, "dampening of the momentum");
    visit("weight_decay", self.weight_decay_, "decay per step at the initial lr (follows the schedule)");
    visit("nesterov", self.nesterov_, "Nesterov momentum");
  }
};

/// Step (per parameter with a gradient g): buf = g on the first step, then momentum*buf + (1-dampening)*g;
/// d = g + momentum*buf (nesterov) or buf (or g without momentum); p *= 1 - (lr/initial_lr)*wd; p -= lr*d.
/// Uses the multi-tensor `_foreach_` kernels (one launch per op on CUDA).
class DecoupledSGDW : public Optimizer {
 public:
  explicit DecoupledSGDW(std::vector<at::Tensor> params, DecoupledSGDWOptions options = DecoupledSGDWOptions());
  DecoupledSGDW(std::vector<torch::optim::OptimizerParamGroup> groups, DecoupledSGDWOptions options);

  at::Tensor step(LossClosure closure = nullptr) override;
  /// Python-style {"state": {index: {"momentum_buffer": t}}, "param_groups": [...]}.
  c10::IValue state_dict() const override;
  void load_state_dict(const c10::IValue& state) override;
  /// Forgets the momentum buffer of `param` (module surgery removed it).
  void erase_state(const at::Tensor& param) override { momentum_buffers_.erase(param.unsafeGetTensorImpl()); }
  std::vector<double> initial_lrs() const override;
  bool supports_graph_capture() const override { return true; }
  /// Throws std::invalid_argument when a group spans devices.
  void set_graph_capture(bool on) override;
  void refresh_graph_scalars() override;

 private:
  void init_groups();
  std::unordered_map<const void*, at::Tensor> momentum_buffers_;
  bool graph_capture_ = false;
  // Per group under graph capture, float64 0-dim tensors on the group's device: -lr, and 1 - (lr/initial_lr)*wd.
  std::vector<at::Tensor> graph_neg_lrs_, graph_decays_;
};

}  // namespace composer::optim
