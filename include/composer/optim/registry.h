// The scheduler and optimizer registries (core/registry.h): every built-in scheduler and optimizer by config name
// ("cosine_annealing_with_warmup", "decoupled_adamw") and class name, with the hyperparameters, defaults and docs of
// its options' field list.
#pragma once

#include "composer/core/registry.h"
#include "composer/optim/scheduler.h"

#include <ATen/core/Tensor.h>
#include <torch/optim/optimizer.h>

#include <vector>

namespace composer::optim {

using SchedulerRegistry = Registry<ComposerScheduler>;
/// Composer's 13 schedulers.
const SchedulerRegistry& scheduler_registry();

/// An optimizer is built over the parameters it trains.
using OptimizerRegistry = Registry<torch::optim::Optimizer, std::vector<at::Tensor>>;
/// Composer's DecoupledSGDW and DecoupledAdamW, and LibTorch's SGD, Adam and AdamW.
const OptimizerRegistry& optimizer_registry();

}  // namespace composer::optim
