// LabelSmoothing: trains against (1 - s) * onehot(y) + s / K instead of hard labels (Composer's LabelSmoothing).
#pragma once

#include "composer/core/algorithm.h"
#include "composer/data/batch.h"

#include <torch/arg.h>

namespace composer {
namespace functional {

/// Index targets [N] (or [N, d...] with logits [N, K, d...]) as one-hot floats shaped like `logits`; dense targets
/// already shaped like `logits` are returned as they are. Throws when the shapes cannot match.
at::Tensor ensure_targets_one_hot(const at::Tensor& logits, const at::Tensor& target);
/// onehot(target) * (1 - smoothing) + smoothing / K, K = logits.size(1); smoothing in [0, 1]. Negative index targets
/// (an ignore_index such as -100) get the uniform row smoothing / K, as in Composer.
at::Tensor smooth_labels(const at::Tensor& logits, const at::Tensor& target, double smoothing = 0.1);

}  // namespace functional

namespace algorithms {

struct LabelSmoothingOptions {
  /// Probability mass spread uniformly over the classes, in [0, 1).
  TORCH_ARG(double, smoothing) = 0.1;
  /// Batch field holding the targets.
  TORCH_ARG(BatchKey, target_key) = BatchKey{int64_t{1}};

 public:
  void validate() const;
  /// The field list: repr, YAML and repr parsing, hyperparameter logging and the docs table (core/fields.h).
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("smoothing", self.smoothing_, "probability mass spread uniformly over the classes, in [0, 1)");
    visit("target_key", self.target_key_, "batch field of the targets");
  }
};

/// BEFORE_LOSS: replaces the targets with smoothed ones; AFTER_LOSS: puts the original targets back.
class LabelSmoothing : public Algorithm {
 public:
  explicit LabelSmoothing(LabelSmoothingOptions options = {});
  bool match(Event event, const State& state) override;
  std::optional<int> apply(Event event, State& state, Logger& logger) override;
  std::string repr() const override;
  const LabelSmoothingOptions& options() const { return options_; }

 private:
  LabelSmoothingOptions options_;
  at::Tensor original_;
};

}  // namespace algorithms
}  // namespace composer
