// CutMix: pastes a box from another sample into each image and mixes the labels by the box area (Composer's CutMix).
#pragma once

#include "composer/core/algorithm.h"
#include "composer/data/batch.h"

#include <torch/arg.h>

#include <array>
#include <optional>
#include <tuple>

namespace composer {
namespace functional {

/// A box over dims 2 and 3 of an image batch: rows [x1, x2), columns [y1, y2) (Composer's (bbx1, bby1, bbx2, bby2)).
using BoundingBox = std::array<int64_t, 4>;

/// Pastes `bbox` (sampled when absent: sides int(dim * sqrt(1 - l)), l ~ Beta(alpha, alpha), or `length` when set,
/// centre uniform in [0, dim) or, with uniform_sampling, in [-cut/2, dim + cut/2), clipped) of input[indices] into
/// input. Returns (x', target[indices], l' = 1 - box area / (H W), bbox).
std::tuple<at::Tensor, at::Tensor, double, BoundingBox> cutmix_batch(
    const at::Tensor& input, const at::Tensor& target, std::optional<int64_t> length = std::nullopt, double alpha = 1.0,
    std::optional<BoundingBox> bbox = std::nullopt, const at::Tensor& indices = {}, bool uniform_sampling = false);

}  // namespace functional

namespace algorithms {

struct CutMixOptions {
  /// Beta(alpha, alpha) concentration of the kept area.
  TORCH_ARG(double, alpha) = 1.0;
  /// Interpolate the two losses instead of building mixed targets.
  TORCH_ARG(bool, interpolate_loss) = false;
  /// Box centres uniform over the image extended by half a box, so every pixel is equally likely to be cut.
  TORCH_ARG(bool, uniform_sampling) = false;
  TORCH_ARG(BatchKey, input_key) = BatchKey{int64_t{0}};
  TORCH_ARG(BatchKey, target_key) = BatchKey{int64_t{1}};

 public:
  void validate() const;
  /// The field list: repr, YAML and repr parsing, hyperparameter logging and the docs table (core/fields.h).
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("alpha", self.alpha_, "Beta(alpha, alpha) concentration of the kept area");
    visit("interpolate_loss", self.interpolate_loss_, "interpolate the two losses instead of building mixed targets");
    visit("uniform_sampling", self.uniform_sampling_, "box centres uniform over the image extended by half a box");
    visit("input_key", self.input_key_, "batch field of the images");
    visit("target_key", self.target_key_, "batch field of the targets");
  }
};

/// BEFORE_FORWARD cuts and pastes; BEFORE_LOSS mixes the targets by area (or BEFORE_BACKWARD the losses). Index
/// targets with the image's height and width (segmentation masks) get the same box pasted in instead.
class CutMix : public Algorithm {
 public:
  explicit CutMix(CutMixOptions options = {});
  bool match(Event event, const State& state) override;
  std::optional<int> apply(Event event, State& state, Logger& logger) override;
  std::string repr() const override;
  /// The area-adjusted weight l' of the original targets in the last microbatch.
  double adjusted_lambda() const { return keep_; }

 private:
  CutMixOptions options_;
  at::Tensor original_, permuted_;
  double keep_ = 1.0;
  functional::BoundingBox box_{};
};

}  // namespace algorithms
}  // namespace composer
