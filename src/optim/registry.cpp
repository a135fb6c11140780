#include "composer/optim/registry.h"

#include "composer/optim/decoupled_adamw.h"
#include "composer/optim/decoupled_sgdw.h"

#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

namespace composer::optim {
namespace {

template <class S>
SchedulerRegistry::Entry scheduler(std::string name, std::string class_name, std::string summary) {
  using Options = decltype(std::declval<const S&>().options());
  return registry_entry<ComposerScheduler, S, std::decay_t<Options>>(std::move(name), std::move(class_name),
                                                                     std::move(summary));
}

std::vector<SchedulerRegistry::Entry> schedulers() {
  return {
      scheduler<ConstantScheduler>("constant", "ConstantScheduler", "alpha before t_max, then 1"),
      scheduler<ConstantWithWarmupScheduler>("constant_with_warmup", "ConstantWithWarmupScheduler",
                                             "linear warmup over t_warmup, then alpha"),
      scheduler<LinearScheduler>("linear", "LinearScheduler", "alpha_i -> alpha_f linearly over t_max"),
      scheduler<LinearWithWarmupScheduler>("linear_with_warmup", "LinearWithWarmupScheduler",
                                           "warmup, then alpha_i -> alpha_f linearly"),
      scheduler<StepScheduler>("step", "StepScheduler", "gamma ^ floor(t / step_size)"),
      scheduler<MultiStepScheduler>("multistep", "MultiStepScheduler", "gamma ^ (milestones passed)"),
      scheduler<MultiStepWithWarmupScheduler>("multistep_with_warmup", "MultiStepWithWarmupScheduler",
                                              "warmup, then multistep on absolute milestones"),
      scheduler<ExponentialScheduler>("exponential", "ExponentialScheduler", "gamma ^ (t / decay_period)"),
      scheduler<CosineAnnealingScheduler>("cosine_annealing", "CosineAnnealingScheduler",
                                          "cosine from 1 to alpha_f over t_max"),
      scheduler<CosineAnnealingWithWarmupScheduler>(
          "cosine_annealing_with_warmup", "CosineAnnealingWithWarmupScheduler", "warmup, then cosine to alpha_f"),
      scheduler<CosineAnnealingWarmRestartsScheduler>("cosine_annealing_warm_restarts",
                                                      "CosineAnnealingWarmRestartsScheduler",
                                                      "cosine restarting every t_0 (times t_mult)"),
      scheduler<PolynomialScheduler>("polynomial", "PolynomialScheduler",
                                     "alpha_f + (1 - t/t_max)^power (1 - alpha_f)"),
      scheduler<PolynomialWithWarmupScheduler>("polynomial_with_warmup", "PolynomialWithWarmupScheduler",
                                               "warmup, then polynomial decay"),
  };
}

// LibTorch's optimizer options have no field lists of their own; these name the fields a config may set. Their
// defaults are LibTorch's (SGD has none for lr: 0.1, Composer's DecoupledSGDW default, is used).
struct SGDFields {
  torch::optim::SGDOptions options{0.1};
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("lr", self.options.lr(), "learning rate");
    visit("momentum", self.options.momentum(), "momentum factor");
    visit("dampening", self.options.dampening(), "dampening of the momentum");
    visit("weight_decay", self.options.weight_decay(), "L2 penalty added to the gradient");
    visit("nesterov", self.options.nesterov(), "Nesterov momentum");
  }
};

template <class TorchOptions>
struct AdamFields {
  TorchOptions options;
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("lr", self.options.lr(), "learning rate");
    visit("betas", self.options.betas(), "coefficients of the running averages of the gradient and its square");
    visit("eps", self.options.eps(), "added to the denominator");
    visit("weight_decay", self.options.weight_decay(), "weight decay");
    visit("amsgrad", self.options.amsgrad(), "use the maximum of the second moments (AMSGrad)");
  }
};

// LibTorch checks its options with messages that name no key ("Invalid learning rate: -1"); these name it.
void check_libtorch_options(Hparams& h, double lr, double weight_decay) {
  if (!(lr >= 0)) h.error("lr", "expected a learning rate >= 0, got " + std::to_string(lr));
  if (!(weight_decay >= 0)) h.error("weight_decay", "expected >= 0, got " + std::to_string(weight_decay));
}
void check_fields(Hparams& h, const SGDFields& f) {
  check_libtorch_options(h, f.options.lr(), f.options.weight_decay());
  if (!(f.options.momentum() >= 0)) h.error("momentum", "expected >= 0, got " + std::to_string(f.options.momentum()));
}
template <class TorchOptions>
void check_fields(Hparams& h, const AdamFields<TorchOptions>& f) {
  check_libtorch_options(h, f.options.lr(), f.options.weight_decay());
  const auto [b1, b2] = f.options.betas();
  if (!(b1 >= 0 && b1 < 1 && b2 >= 0 && b2 < 1)) h.error("betas", "expected two numbers in [0, 1)");
  if (!(f.options.eps() >= 0)) h.error("eps", "expected >= 0, got " + std::to_string(f.options.eps()));
}
template <class Options>
void check_fields(Hparams&, const Options&) {}  // ours validate themselves, naming the field

// An optimizer entry: `Fields` read from the hyperparameters and checked, then `build(parameters, fields)`.
template <class Fields, class Build>
OptimizerRegistry::Entry optimizer(std::string name, std::string class_name, std::string summary, Build build) {
  return registry_entry<torch::optim::Optimizer, std::vector<at::Tensor>>(
      std::move(name), std::move(class_name), std::move(summary), Fields(),
      [build](Hparams& h, const Fields& fields,
              std::vector<at::Tensor> params) -> std::shared_ptr<torch::optim::Optimizer> {
        check_fields(h, fields);
        return build(std::move(params), fields);
      });
}

std::vector<OptimizerRegistry::Entry> optimizers() {
  return {
      optimizer<DecoupledSGDWOptions>(
          "decoupled_sgdw", "DecoupledSGDW", "SGD with weight decay that follows the schedule (the default)",
          [](std::vector<at::Tensor> p, DecoupledSGDWOptions o) { return std::make_shared<DecoupledSGDW>(p, o); }),
      optimizer<DecoupledAdamWOptions>(
          "decoupled_adamw", "DecoupledAdamW", "AdamW with weight decay that follows the schedule",
          [](std::vector<at::Tensor> p, DecoupledAdamWOptions o) { return std::make_shared<DecoupledAdamW>(p, o); }),
      optimizer<SGDFields>("sgd", "SGD", "LibTorch's torch::optim::SGD",
                           [](std::vector<at::Tensor> p, const SGDFields& f) {
                             return std::make_shared<torch::optim::SGD>(p, f.options);
                           }),
      optimizer<AdamFields<torch::optim::AdamOptions>>(
          "adam", "Adam", "LibTorch's torch::optim::Adam",
          [](std::vector<at::Tensor> p, const AdamFields<torch::optim::AdamOptions>& f) {
            return std::make_shared<torch::optim::Adam>(p, f.options);
          }),
      optimizer<AdamFields<torch::optim::AdamWOptions>>(
          "adamw", "AdamW", "LibTorch's torch::optim::AdamW",
          [](std::vector<at::Tensor> p, const AdamFields<torch::optim::AdamWOptions>& f) {
            return std::make_shared<torch::optim::AdamW>(p, f.options);
          }),
  };
}

}  // namespace

const SchedulerRegistry& scheduler_registry() {
  static const SchedulerRegistry registry("scheduler", schedulers());
  return registry;
}

const OptimizerRegistry& optimizer_registry() {
  static const OptimizerRegistry registry("optimizer", optimizers());
  return registry;
}

}  // namespace composer::optim
