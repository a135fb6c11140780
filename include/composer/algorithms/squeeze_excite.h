// SqueezeExcite: channel attention after wide convolutions (Composer's SqueezeExcite, Hu et al. 2018).
#pragma once

#include "composer/algorithms/module_surgery.h"
#include "composer/core/algorithm.h"
#include "composer/nn/layers.h"

#include <torch/arg.h>

namespace composer {
namespace nn {

/// x * sigmoid(W2 relu(W1 avgpool(x))), no biases. Child "pool_and_mlp" = Sequential of GlobalAvgPool, Flatten,
/// Linear(C -> r), ReLU, Linear(r -> C), Sigmoid (Composer's parameter names). r = latent_channels if >= 1, else
/// int(latent_channels * C).
class SqueezeExcite2d : public Composite {
 public:
  SqueezeExcite2d(int64_t num_features, double latent_channels = 0.125);
  at::Tensor forward(const at::Tensor& x) override;
  int64_t latent_channels;
};

/// The original convolution (child "conv") followed by a SqueezeExcite2d on its outputs (child "se").
class SqueezeExciteConv2d : public Composite {
 public:
  SqueezeExciteConv2d(std::shared_ptr<Conv2d> conv, double latent_channels);
  at::Tensor forward(const at::Tensor& x) override;
};

}  // namespace nn

namespace functional {

struct SqueezeExciteOptions {
  /// Hidden width of the excitation MLP: channels if >= 1, else a fraction of the conv's output channels.
  TORCH_ARG(double, latent_channels) = 64;
  /// Only convolutions with min(in_channels, out_channels) >= min_channels get a block.
  TORCH_ARG(int64_t, min_channels) = 128;

 public:
  void validate() const;
  /// The field list: repr, YAML and repr parsing, hyperparameter logging and the docs table (core/fields.h).
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("latent_channels", self.latent_channels_,
          "hidden width of the excitation MLP: channels if >= 1, else a fraction of the output channels");
    visit("min_channels", self.min_channels_, "only convolutions with min(in, out) >= min_channels get a block");
  }
};

std::vector<Replacement> apply_squeeze_excite(torch::nn::Module& model, const SqueezeExciteOptions& options = {},
                                              torch::optim::Optimizer* optimizer = nullptr);

}  // namespace functional

namespace algorithms {

using functional::SqueezeExciteOptions;

/// INIT: functional::apply_squeeze_excite (required on load).
class SqueezeExcite : public Algorithm {
 public:
  explicit SqueezeExcite(SqueezeExciteOptions options = {});
  bool match(Event event, const State& state) override;
  std::optional<int> apply(Event event, State& state, Logger& logger) override;
  bool required_on_load() const override { return true; }
  std::string repr() const override;

 private:
  SqueezeExciteOptions options_;
};

}  // namespace algorithms
}  // namespace composer
