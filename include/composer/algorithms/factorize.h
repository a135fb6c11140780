// Factorize: replaces wide convolutions and linear layers by two thinner ones through a rank-r bottleneck
// (Composer's Factorize).
#pragma once

#include "composer/algorithms/module_surgery.h"
#include "composer/core/algorithm.h"
#include "composer/nn/layers.h"

#include <torch/arg.h>

namespace composer {
namespace nn {

/// k x k conv in -> r (no bias; the original stride and padding) then 1 x 1 conv r -> out (bias as the original).
/// Children "conv0", "conv1"; both freshly initialised (Composer does not fit them to the original weights).
class FactorizedConv2d : public Composite {
 public:
  FactorizedConv2d(const Conv2d& original, int64_t latent_channels);
  at::Tensor forward(const at::Tensor& x) override;
  /// Lowers the rank to `rank` (<= latent_channels) with the factors that best reproduce this module's current
  /// outputs on `input` (least squares over the input's patches: reduced-rank regression). New parameter tensors
  /// replace the old ones, in `optimizer` too when given. Throws when rank is not in [1, latent_channels].
  void set_rank(const at::Tensor& input, int64_t rank, torch::optim::Optimizer* optimizer = nullptr);
  int64_t latent_channels;
};

/// Linear in -> r (no bias) then r -> out (bias as the original). Children "module0", "module1".
class FactorizedLinear : public Composite {
 public:
  FactorizedLinear(const Linear& original, int64_t latent_features);
  at::Tensor forward(const at::Tensor& x) override;
  /// As FactorizedConv2d::set_rank, for inputs [..., in_features].
  void set_rank(const at::Tensor& input, int64_t rank, torch::optim::Optimizer* optimizer = nullptr);
  int64_t latent_features;
};

}  // namespace nn

namespace functional {

/// r = latent if latent >= 1, else max(1, int(latent * min(in, out))).
int64_t factorized_rank(double latent, int64_t in, int64_t out);
/// The largest rank that still saves multiply-adds: ceil(fan_in * out / (fan_in + out) - 1), fan_in = in * k * k.
int64_t max_rank_with_speedup(int64_t in, int64_t out, int64_t kernel_area = 1);

struct FactorizeOptions {
  TORCH_ARG(bool, factorize_convs) = true;
  TORCH_ARG(bool, factorize_linears) = true;
  /// Convolutions with min(in, out) below this stay.
  TORCH_ARG(int64_t, min_channels) = 256;
  /// Rank of factorized convolutions: channels if >= 1, else a fraction of min(in, out).
  TORCH_ARG(double, latent_channels) = 0.25;
  TORCH_ARG(int64_t, min_features) = 256;
  /// Rank of factorized linears: features if >= 1, else a fraction of min(in, out).
  TORCH_ARG(double, latent_features) = 128;

 public:
  void validate() const;
  /// The field list: repr, YAML and repr parsing, hyperparameter logging and the docs table (core/fields.h).
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("factorize_convs", self.factorize_convs_, "factorize convolutions");
    visit("factorize_linears", self.factorize_linears_, "factorize linear layers");
    visit("min_channels", self.min_channels_, "convolutions with min(in, out) below this stay");
    visit("latent_channels", self.latent_channels_,
          "rank of factorized convolutions: channels if >= 1, else a fraction of min(in, out)");
    visit("min_features", self.min_features_, "linears with min(in, out) below this stay");
    visit("latent_features", self.latent_features_,
          "rank of factorized linears: features if >= 1, else a fraction of min(in, out)");
  }
};

/// Replaces Conv2d (groups = 1) and Linear layers that are wide enough and whose rank saves compute.
std::vector<Replacement> apply_factorization(torch::nn::Module& model, const FactorizeOptions& options = {},
                                             torch::optim::Optimizer* optimizer = nullptr);

}  // namespace functional

namespace algorithms {

using functional::FactorizeOptions;

/// INIT: functional::apply_factorization (required on load).
class Factorize : public Algorithm {
 public:
  explicit Factorize(FactorizeOptions options = {});
  bool match(Event event, const State& state) override;
  std::optional<int> apply(Event event, State& state, Logger& logger) override;
  bool required_on_load() const override { return true; }
  std::string repr() const override;

 private:
  FactorizeOptions options_;
};

}  // namespace algorithms
}  // namespace composer
