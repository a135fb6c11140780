// CutOut: zeroes random square holes in every image of a batch (Composer's CutOut).
#pragma once

#include "composer/core/algorithm.h"
#include "composer/data/batch.h"

#include <torch/arg.h>

namespace composer {
namespace functional {

/// Zeroes `num_holes` squares of side L = int(min(H, W) * length) if 0 < length < 1, else int(length) pixels,
/// spanning [c - L/2, c + L/2) clipped, centres uniform in the image (or, with uniform_sampling, in the image grown
/// by L/2). One mask for the whole batch, as in Composer.
at::Tensor cutout_batch(const at::Tensor& input, int64_t num_holes = 1, double length = 0.5,
                        bool uniform_sampling = false);

}  // namespace functional

namespace algorithms {

struct CutOutOptions {
  TORCH_ARG(int64_t, num_holes) = 1;
  /// Hole side as a fraction of min(H, W) when in (0, 1), else in pixels.
  TORCH_ARG(double, length) = 0.5;
  TORCH_ARG(bool, uniform_sampling) = false;
  TORCH_ARG(BatchKey, input_key) = BatchKey{int64_t{0}};

 public:
  void validate() const;
  /// The field list: repr, YAML and repr parsing, hyperparameter logging and the docs table (core/fields.h).
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("num_holes", self.num_holes_, "squares cut per image");
    visit("length", self.length_, "hole side: a fraction of min(H, W) in (0, 1), else pixels");
    visit("uniform_sampling", self.uniform_sampling_, "hole centres uniform over the image extended by half a hole");
    visit("input_key", self.input_key_, "batch field of the images");
  }
};

/// AFTER_DATALOADER: cuts holes in the batch's inputs.
class CutOut : public Algorithm {
 public:
  explicit CutOut(CutOutOptions options = {});
  bool match(Event event, const State& state) override;
  std::optional<int> apply(Event event, State& state, Logger& logger) override;
  std::string repr() const override;

 private:
  CutOutOptions options_;
};

}  // namespace algorithms
}  // namespace composer
