#include "composer/algorithms/ghost_batchnorm.h"

#include "algorithms/detail/common.h"
#include "composer/core/fields.h"
#include "composer/core/state.h"
#include "composer/models/composer_model.h"

#include <torch/torch.h>

#include <iostream>

namespace composer {
namespace nn {

GhostBatchNorm2d::GhostBatchNorm2d(std::shared_ptr<BatchNorm2d> batchnorm, int64_t g)
    : ghost_batch_size(g), bn_(batchnorm.get()) {
  if (g < 1) algorithms::detail::bad_option("GhostBatchNorm", "ghost_batch_size", ">= 1", static_cast<double>(g));
  add("batchnorm", std::move(batchnorm));
}

at::Tensor GhostBatchNorm2d::forward(const at::Tensor& x) {
  if (!is_training()) return child("batchnorm").forward(x);
  const int64_t n = x.size(0);
  if (n < ghost_batch_size) {
    throw std::invalid_argument("GhostBatchNorm: worker batch size " + std::to_string(n) + " < ghost_batch_size " +
                                std::to_string(ghost_batch_size));
  }
  const int64_t chunks = (n + ghost_batch_size - 1) / ghost_batch_size;
  const double momentum = bn_->momentum;
  bn_->momentum = momentum / static_cast<double>(chunks);
  std::vector<at::Tensor> outs;
  try {
    for (const auto& piece : x.chunk(chunks, 0)) outs.push_back(child("batchnorm").forward(piece));
  } catch (...) {
    bn_->momentum = momentum;
    throw;
  }
  bn_->momentum = momentum;
  return at::cat(outs, 0);
}

}  // namespace nn

namespace functional {

std::vector<Replacement> apply_ghost_batchnorm(torch::nn::Module& model, int64_t ghost_batch_size,
                                               torch::optim::Optimizer* optimizer) {
  if (ghost_batch_size < 1)
    algorithms::detail::bad_option("apply_ghost_batchnorm", "ghost_batch_size", ">= 1",
                                   static_cast<double>(ghost_batch_size));
  // The BatchNorm2d object moves into the wrapper: same parameters, so the optimizer needs no change.
  std::vector<ReplacementPolicy> policies{
      policy_for<nn::BatchNorm2d>([&](nn::BatchNorm2d& bn, int64_t) -> std::shared_ptr<nn::Layer> {
        return std::make_shared<nn::GhostBatchNorm2d>(std::dynamic_pointer_cast<nn::BatchNorm2d>(bn.shared_from_this()),
                                                      ghost_batch_size);
      })};
  SurgeryOptions so;
  so.optimizer = optimizer;
  return replace_module_classes(model, policies, so);
}

}  // namespace functional

namespace algorithms {

void GhostBatchNormOptions::validate() const {
  if (ghost_batch_size_ < 1)
    detail::bad_option("GhostBatchNorm", "ghost_batch_size", ">= 1", static_cast<double>(ghost_batch_size_));
}

GhostBatchNorm::GhostBatchNorm(GhostBatchNormOptions options) : options_(options) { options_.validate(); }

bool GhostBatchNorm::match(Event event, const State&) { return event == Event::INIT; }

std::optional<int> GhostBatchNorm::apply(Event, State& state, Logger&) {
  if (functional::apply_ghost_batchnorm(*state.model, options_.ghost_batch_size(), state.optimizer.get()).empty()) {
    std::cerr << "composer: GhostBatchNorm found no BatchNorm2d to replace\n";
  }
  return std::nullopt;
}

std::string GhostBatchNorm::repr() const { return options_repr("GhostBatchNorm", options_); }

}  // namespace algorithms
}  // namespace composer
