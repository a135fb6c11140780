// AugMix: mixes each image with a Dirichlet-weighted sum of randomly augmented copies (Composer's AugMix,
// Hendrycks et al. 2020).
#pragma once

#include "composer/algorithms/augmentation_primitives.h"
#include "composer/core/algorithm.h"
#include "composer/data/dataset_loader.h"

#include <torch/arg.h>

namespace composer {
namespace functional {

struct AugMixOptions {
  /// Strength of each operation, in [0, 10].
  TORCH_ARG(double, severity) = 3;
  /// Operations per chain; <= 0 draws 1, 2 or 3 per chain.
  TORCH_ARG(int64_t, depth) = -1;
  /// Number of chains mixed.
  TORCH_ARG(int64_t, width) = 3;
  /// Dirichlet concentration of the chain weights and Beta(alpha, alpha) of the final mix.
  TORCH_ARG(double, alpha) = 1.0;
  /// "all" or "safe" (augmentation_set()).
  TORCH_ARG(std::string, augmentation_set) = "all";

 public:
  void validate() const;
  /// The field list: repr, YAML and repr parsing, hyperparameter logging and the docs table (core/fields.h).
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("severity", self.severity_, "strength of each operation, in [0, 10]");
    visit("depth", self.depth_, "operations per chain; <= 0 draws 1, 2 or 3 per chain");
    visit("width", self.width_, "number of chains mixed");
    visit("alpha", self.alpha_, "Dirichlet concentration of the chain weights and Beta(alpha, alpha) of the final mix");
    visit("augmentation_set", self.augmentation_set_, "'all' or 'safe'");
  }
};

/// One image [C, H, W]: w ~ Dirichlet(alpha), m ~ Beta(alpha, alpha); result (1 - m) x + m sum_i w_i chain_i(x),
/// truncated to uint8 as Composer's np.uint8 does (float images stay float in [0, 1]).
at::Tensor augmix_image(const at::Tensor& image, const AugMixOptions& options, at::Generator& gen);
/// AugMix per image of the batch's input, as a data-loader transform (Composer's AugmentAndMixTransform).
BatchTransform augmix_transform(const AugMixOptions& options = {});

}  // namespace functional

namespace algorithms {

using functional::AugMixOptions;

/// FIT_START: puts augmix_transform() in front of the training DatasetLoader's transforms.
class AugMix : public Algorithm {
 public:
  explicit AugMix(AugMixOptions options = {});
  bool match(Event event, const State& state) override;
  std::optional<int> apply(Event event, State& state, Logger& logger) override;
  std::string repr() const override;

 private:
  AugMixOptions options_;
  bool added_ = false;
};

}  // namespace algorithms
}  // namespace composer
