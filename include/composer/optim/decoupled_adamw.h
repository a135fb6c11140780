// DecoupledAdamW: AdamW whose weight decay follows the learning-rate schedule (Composer's optim.DecoupledAdamW).
#pragma once

#include <torch/arg.h>
#include "composer/optim/optimizer.h"

#include <torch/optim/optimizer.h>

#include <tuple>
#include <unordered_map>

namespace composer::optim {

struct DecoupledAdamWOptions : torch::optim::OptimizerCloneableOptions<DecoupledAdamWOptions> {
  using betas_t = std::tuple<double, double>;
  explicit DecoupledAdamWOptions(double lr = 1e-3) : lr_(lr) {}
  TORCH_ARG(double, lr);
  /// Composer's default beta2 is 0.95 (torch's is 0.999).
  TORCH_ARG(betas_t, betas) = std::make_tuple(0.9, 0.95);
  TORCH_ARG(double, eps) = 1e-8;
  /// Decay is p *= 1 - (lr / initial_lr) * weight_decay.
  TORCH_ARG(double, weight_decay) = 1e-5;
  TORCH_ARG(bool, amsgrad) = false;
  TORCH_ARG(double, initial_lr) = -1.0;

 public:
  double get_lr() const override { return lr_; }
  void set_lr(const double lr) override { lr_ = lr; }
  void validate() const;
  /// The field list (core/fields.h): the registry's hyperparameters, their defaults and docs.
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("lr", self.lr_, "learning rate");
    visit("betas", self.betas_, "coefficients of the running averages of the gradient and its square");
    visit("eps", self.eps_, "added to the denominator");
    visit("weight_decay", self.weight_decay_, "decay per step at the initial lr (follows the schedule)");
    visit("amsgrad", self.amsgrad_, "use the maximum of the second moments (AMSGrad)");
  }
};

/// Step t: p *= 1 - (lr/initial_lr)*wd; m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g^2;
/// p -= (lr / (1-b1^t)) * m / (sqrt(v)/sqrt(1-b2^t) + eps) (max of v with amsgrad).
/// CUDA with LibTorch >= 2.4: one `_fused_adamw_` kernel per device/dtype group; elsewhere `_foreach_` kernels.
/// Under set_graph_capture(true) the fused kernel on any device, with the lr read from a device tensor.
class DecoupledAdamW : public Optimizer {
 public:
  explicit DecoupledAdamW(std::vector<at::Tensor> params, DecoupledAdamWOptions options = DecoupledAdamWOptions());
  DecoupledAdamW(std::vector<torch::optim::OptimizerParamGroup> groups, DecoupledAdamWOptions options);

  at::Tensor step(LossClosure closure = nullptr) override;
  c10::IValue state_dict() const override;
  void load_state_dict(const c10::IValue& state) override;
  /// Forgets the moments of `param` (module surgery removed it).
  void erase_state(const at::Tensor& param) override { state_by_param_.erase(param.unsafeGetTensorImpl()); }
  std::vector<double> initial_lrs() const override;
  bool supports_graph_capture() const override { return true; }
  /// Throws std::invalid_argument when a group mixes devices or dtypes (the fused kernel takes one of each).
  void set_graph_capture(bool on) override;
  void refresh_graph_scalars() override;
  /// As Composer's: l2_norm/moment (of exp_avg), l2_norm/param, l2_norm/update (of lr/(1-b1^t) * m / (sqrt(v) /
  /// sqrt(1-b2^t) + eps) - (lr/initial_lr)*wd * p, with group 0's options) and l2_norm/grad, for a stepped param.
  std::vector<std::string> per_parameter_norm_keys() const override;
  std::optional<std::vector<double>> per_parameter_squares(const at::Tensor& param, int64_t begin,
                                                           int64_t end) const override;

 private:
  struct ParamState {
    int64_t step = 0;        // the count, unless step_tensor holds it
    at::Tensor step_tensor;  // float32 scalar on the param's device, once the fused kernel stepped it
    at::Tensor exp_avg, exp_avg_sq, max_exp_avg_sq;
  };
  void init_groups();
  void step_fused(const torch::optim::OptimizerParamGroup& group, const std::vector<at::Tensor>& params,
                  const at::Tensor& lr);
  static int64_t step_count(const ParamState& state);
  std::unordered_map<const void*, ParamState> state_by_param_;
  bool graph_capture_ = false;
  std::vector<at::Tensor> graph_lrs_;  // per group under graph capture: float32, 0-dim, on the group's device
};

}  // namespace composer::optim
