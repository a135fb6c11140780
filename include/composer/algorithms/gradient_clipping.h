// GradientClipping: clips the gradients after the backward pass, before the optimizer steps (Composer's
// GradientClipping): by their total norm, by value, or adaptively against the weights' norms (AGC).
#pragma once

#include "composer/core/algorithm.h"
#include "composer/core/fields.h"

#include <torch/arg.h>

#include <string>
#include <vector>

namespace composer {
class Hparams;
namespace functional {

/// Composer's clipping_type: 'norm' (torch.nn.utils.clip_grad_norm_), 'value' (clip_grad_value_) or 'adaptive'
/// (adaptive gradient clipping, Brock et al. 2021).
enum class ClippingType { ADAPTIVE, NORM, VALUE };
/// Field-list conversions (core/fields.h): 'adaptive', 'norm', 'value'.
std::string field_text(ClippingType value);
void read_field(Hparams& hparams, const std::string& key, ClippingType& value);

/// Clips the gradients of `parameters` in place (parameters without a gradient are skipped), as Composer's
/// apply_gradient_clipping does for a model that is not sharded:
/// - NORM: every gradient times min(1, threshold / (total L2 norm + 1e-6));
/// - VALUE: every element clamped to [-threshold, threshold];
/// - ADAPTIVE: per unit (a weight's rows over their other dimensions; a bias or scalar whole) the gradient times
///   min(1, threshold * |weight unit| / |gradient unit|), 1 where that is 0 / 0.
/// Throws std::invalid_argument for a threshold that is not positive.
void apply_gradient_clipping(const std::vector<at::Tensor>& parameters, ClippingType type, double threshold);

}  // namespace functional

namespace algorithms {

struct GradientClippingOptions {
  /// How to clip (required, as in Composer).
  TORCH_ARG(Required<functional::ClippingType>, clipping_type);
  /// The largest total norm (norm), element magnitude (value) or gradient-to-weight norm ratio (adaptive); > 0.
  TORCH_ARG(Required<double>, clipping_threshold);

 public:
  void validate() const;
  /// The field list: repr, YAML and repr parsing, hyperparameter logging and the docs table (core/fields.h).
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("clipping_type", self.clipping_type_, "required: 'adaptive', 'norm' or 'value'");
    visit("clipping_threshold", self.clipping_threshold_,
          "required: the largest total norm (norm), magnitude (value) or gradient/weight norm ratio (adaptive)");
  }
};

/// AFTER_TRAIN_BATCH: clips the model's gradients, which are complete then (after the last microbatch, averaged
/// over the ranks under DDP) and not yet used by the optimizer. Matches INIT as well, where it does nothing (Composer
/// sets up sharded models there), so the algorithm traces are Composer's.
class GradientClipping : public Algorithm {
 public:
  explicit GradientClipping(GradientClippingOptions options);
  bool match(Event event, const State& state) override;
  std::optional<int> apply(Event event, State& state, Logger& logger) override;
  std::string repr() const override;
  const GradientClippingOptions& options() const { return options_; }

 private:
  GradientClippingOptions options_;
};

}  // namespace algorithms
}  // namespace composer
