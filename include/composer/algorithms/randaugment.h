// RandAugment: applies `depth` random operations to each image (Composer's RandAugment, Cubuk et al. 2020).
#pragma once

#include "composer/algorithms/augmentation_primitives.h"
#include "composer/core/algorithm.h"
#include "composer/data/dataset_loader.h"

#include <torch/arg.h>

namespace composer {
namespace functional {

struct RandAugmentOptions {
  /// Strength of each operation, in [0, 10].
  TORCH_ARG(double, severity) = 9;
  /// Operations applied in sequence, each drawn uniformly from the set.
  TORCH_ARG(int64_t, depth) = 2;
  TORCH_ARG(std::string, augmentation_set) = "all";

 public:
  void validate() const;
  /// The field list: repr, YAML and repr parsing, hyperparameter logging and the docs table (core/fields.h).
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("severity", self.severity_, "strength of each operation, in [0, 10]");
    visit("depth", self.depth_, "operations applied in sequence, each drawn uniformly from the set");
    visit("augmentation_set", self.augmentation_set_, "'all' or 'safe'");
  }
};

at::Tensor randaugment_image(const at::Tensor& image, const RandAugmentOptions& options, at::Generator& gen);
/// RandAugment per image of the batch's input, as a data-loader transform (Composer's RandAugmentTransform).
BatchTransform randaugment_transform(const RandAugmentOptions& options = {});

}  // namespace functional

namespace algorithms {

using functional::RandAugmentOptions;

/// FIT_START: puts randaugment_transform() in front of the training DatasetLoader's transforms.
class RandAugment : public Algorithm {
 public:
  explicit RandAugment(RandAugmentOptions options = {});
  bool match(Event event, const State& state) override;
  std::optional<int> apply(Event event, State& state, Logger& logger) override;
  std::string repr() const override;

 private:
  RandAugmentOptions options_;
  bool added_ = false;
};

}  // namespace algorithms
}  // namespace composer
