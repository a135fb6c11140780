// MixUp: trains on convex combinations of pairs of samples and of their labels (Composer's MixUp).
#pragma once

#include "composer/core/algorithm.h"
#include "composer/data/batch.h"

#include <torch/arg.h>

#include <optional>
#include <tuple>

namespace composer {
namespace functional {

/// x' = (1 - m) x + m x[perm]. `mixing` defaults to min(l, 1 - l), l ~ Beta(alpha, alpha) (0 when alpha = 0);
/// `indices` default to a random permutation. Returns (x', target[perm], m).
std::tuple<at::Tensor, at::Tensor, double> mixup_batch(const at::Tensor& input, const at::Tensor& target,
                                                       std::optional<double> mixing = std::nullopt, double alpha = 0.2,
                                                       const at::Tensor& indices = {});

}  // namespace functional

namespace algorithms {

struct MixUpOptions {
  /// Beta(alpha, alpha) concentration; 0 disables mixing.
  TORCH_ARG(double, alpha) = 0.2;
  /// Interpolate the two losses instead of building mixed targets.
  TORCH_ARG(bool, interpolate_loss) = false;
  TORCH_ARG(BatchKey, input_key) = BatchKey{int64_t{0}};
  TORCH_ARG(BatchKey, target_key) = BatchKey{int64_t{1}};

 public:
  void validate() const;
  /// The field list: repr, YAML and repr parsing, hyperparameter logging and the docs table (core/fields.h).
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("alpha", self.alpha_, "Beta(alpha, alpha) concentration; 0 disables mixing");
    visit("interpolate_loss", self.interpolate_loss_, "interpolate the two losses instead of building mixed targets");
    visit("input_key", self.input_key_, "batch field of the inputs");
    visit("target_key", self.target_key_, "batch field of the targets");
  }
};

/// BEFORE_FORWARD mixes the inputs; BEFORE_LOSS mixes the targets (or BEFORE_BACKWARD the losses).
class MixUp : public Algorithm {
 public:
  explicit MixUp(MixUpOptions options = {});
  bool match(Event event, const State& state) override;
  std::optional<int> apply(Event event, State& state, Logger& logger) override;
  std::string repr() const override;
  /// The mixing coefficient m of the last microbatch.
  double mixing() const { return 1.0 - keep_; }

 private:
  MixUpOptions options_;
  at::Tensor original_, permuted_;
  double keep_ = 1.0;
};

}  // namespace algorithms
}  // namespace composer
