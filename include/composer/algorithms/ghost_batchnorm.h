// GhostBatchNorm: batch normalization over smaller "ghost" batches, a regularizer (Composer's GhostBatchNorm).
#pragma once

#include "composer/algorithms/module_surgery.h"
#include "composer/core/algorithm.h"
#include "composer/nn/layers.h"

#include <torch/arg.h>

namespace composer {
namespace nn {

/// Runs the wrapped BatchNorm2d (child "batchnorm") on each of ceil(N / ghost_batch_size) chunks of the batch while
/// training, with the momentum divided by the chunk count. In eval mode it normalizes the batch at once (running
/// statistics do not depend on chunking). Training batches smaller than ghost_batch_size are an error.
class GhostBatchNorm2d : public Composite {
 public:
  GhostBatchNorm2d(std::shared_ptr<BatchNorm2d> batchnorm, int64_t ghost_batch_size);
  at::Tensor forward(const at::Tensor& x) override;
  int64_t ghost_batch_size;

 private:
  BatchNorm2d* bn_;
};

}  // namespace nn

namespace functional {

/// Wraps every BatchNorm2d of `model` in a GhostBatchNorm2d.
std::vector<Replacement> apply_ghost_batchnorm(torch::nn::Module& model, int64_t ghost_batch_size = 32,
                                               torch::optim::Optimizer* optimizer = nullptr);

}  // namespace functional

namespace algorithms {

struct GhostBatchNormOptions {
  /// Samples per ghost batch; training batches must hold at least this many.
  TORCH_ARG(int64_t, ghost_batch_size) = 32;

 public:
  void validate() const;
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("ghost_batch_size", self.ghost_batch_size_, "samples per ghost batch");
  }
};

/// INIT: functional::apply_ghost_batchnorm (required on load).
class GhostBatchNorm : public Algorithm {
 public:
  explicit GhostBatchNorm(GhostBatchNormOptions options = {});
  bool match(Event event, const State& state) override;
  std::optional<int> apply(Event event, State& state, Logger& logger) override;
  bool required_on_load() const override { return true; }
  std::string repr() const override;

 private:
  GhostBatchNormOptions options_;
};

}  // namespace algorithms
}  // namespace composer
