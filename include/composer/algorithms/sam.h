// SAM: sharpness-aware minimization, a second forward-backward at weights perturbed up the gradient (Composer's SAM
// and SAMOptimizer).
#pragma once

#include "composer/core/algorithm.h"
#include "composer/core/fields.h"
#include "composer/optim/optimizer.h"

#include <torch/arg.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace composer {
namespace algorithms {

/// Wraps `base` (Composer's SAMOptimizer). Every `interval`-th step runs the closure twice: first with gradients kept
/// on each rank (optim::NoSyncClosure), then moves each parameter by e_w = grad * rho / (||grad||_2 + epsilon) (the
/// norm over all gradients), runs the closure again at w + e_w, takes e_w back and steps `base` with the gradient
/// found there. A run whose loss is 0 skips the update, as Composer's `if loss:`. The other steps run the closure
/// once and step `base`. The learning rates and parameters of this optimizer's groups (schedulers and surgery edit
/// them) are passed to `base` before it steps; checkpoints hold and name `base` (checkpointed()). Under a strategy
/// that holds the gradients in shards (FSDP, set_sharded_gradient_norm) a rank cannot perturb weights it holds only
/// part of by its own gradient: the first closure then averages the gradients across ranks (so every rank perturbs
/// its part by the global batch's gradient, as one process with that batch does) and the norm is over every rank's
/// part.
class SAMOptimizer : public optim::Optimizer {
 public:
  SAMOptimizer(std::shared_ptr<torch::optim::Optimizer> base, double rho = 0.05, double epsilon = 1e-12,
               int64_t interval = 1);
  /// Requires a closure: throws std::invalid_argument without one.
  at::Tensor step(LossClosure closure) override;
  c10::IValue state_dict() const override;
  void load_state_dict(const c10::IValue& state) override;
  void erase_state(const at::Tensor& param) override;
  std::vector<double> initial_lrs() const override;
  const torch::optim::Optimizer& checkpointed() const override { return *base_; }

  torch::optim::Optimizer& base_optimizer() const { return *base_; }
  const std::shared_ptr<torch::optim::Optimizer>& base_ptr() const { return base_; }
  double rho() const { return rho_; }
  double epsilon() const { return epsilon_; }
  int64_t interval() const { return interval_; }
  /// Steps taken; every interval-th (global_step + 1 divisible by interval) is a SAM step.
  int64_t global_step() const { return global_step_; }
  void set_global_step(int64_t step) { global_step_ = step; }
  /// Under a strategy that holds the gradients in shards: `norm` gives the L2 norm of the gradients over every rank
  /// (a collective); the first closure then syncs the gradients. Unset (the default): local gradients.
  void set_sharded_gradient_norm(std::function<double()> norm) { sharded_norm_ = std::move(norm); }

 private:
  void first_step();
  void second_step();
  void sub_e_w();
  void pass_groups_to_base();

  std::shared_ptr<torch::optim::Optimizer> base_;
  double rho_, epsilon_;
  int64_t interval_;
  int64_t global_step_ = 0;
  std::vector<std::pair<at::Tensor, at::Tensor>> e_w_;  // (parameter, its perturbation) during a SAM step
  std::function<double()> sharded_norm_;
};

struct SAMOptions {
  /// Size of the perturbation (the neighbourhood radius), >= 0.
  TORCH_ARG(double, rho) = 0.05;
  /// Added to the gradient norm, > 0.
  TORCH_ARG(double, epsilon) = 1e-12;
  /// Run SAM every `interval` steps, the plain optimizer between, >= 1.
  TORCH_ARG(int64_t, interval) = 1;

 public:
  void validate() const;
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("rho", self.rho_, "neighbourhood size of the perturbation, >= 0");
    visit("epsilon", self.epsilon_, "added to the gradient norm, > 0");
    visit("interval", self.interval_, "SAM step every interval steps (the plain optimizer between), >= 1");
  }
};

/// AFTER_LOAD: wraps state.optimizer in a SAMOptimizer (after the checkpoint loaded into the plain one). The
/// Trainer's step closure re-runs BEFORE_TRAIN_BATCH .. AFTER_TRAIN_BATCH for the second pass, over every
/// microbatch. The interval count is in the checkpoint (key global_step). Throws std::invalid_argument for
/// amp_fp16, whose grad scaler does not step through the closure here.
class SAM : public Algorithm {
 public:
  explicit SAM(SAMOptions options = SAMOptions());
  bool match(Event event, const State& state) override;
  std::optional<int> apply(Event event, State& state, Logger& logger) override;
  std::string repr() const override;
  c10::IValue state_dict() const override;
  void load_state_dict(const c10::IValue& state) override;
  const SAMOptions& options() const { return options_; }

 private:
  SAMOptions options_;
  std::weak_ptr<SAMOptimizer> optimizer_;
  int64_t loaded_global_step_ = 0;
};

}  // namespace algorithms
}  // namespace composer
