// ProgressiveResizing: trains on downscaled images early and grows them to full size (Composer's
// ProgressiveResizing).
#pragma once

#include "composer/core/algorithm.h"
#include "composer/data/batch.h"

#include <torch/arg.h>

#include <utility>

namespace composer {
class Hparams;
namespace functional {

enum class ResizeMode { RESIZE, CROP };
/// Field-list conversions (core/fields.h): 'resize', 'crop'.
std::string field_text(ResizeMode value);
void read_field(Hparams& hparams, const std::string& key, ResizeMode& value);

/// Scales `input` [N, C, H, W] by `scale_factor` < 1: Resize = nearest-neighbour interpolation to
/// floor(H * s) x floor(W * s); Crop = one random int(s H) x int(s W) crop for the batch. `target` is changed the same
/// way when resize_targets. scale_factor >= 1 returns the batch unchanged.
std::pair<at::Tensor, at::Tensor> resize_batch(const at::Tensor& input, const at::Tensor& target, double scale_factor,
                                               ResizeMode mode = ResizeMode::RESIZE, bool resize_targets = false);

/// The scale at `elapsed` (fraction of training): f = 0 before delay_fraction, else
/// min((elapsed - delay) / (1 - finetune - delay), 1); scale = initial + (1 - initial) f.
double progressive_resizing_scale(double elapsed, double initial_scale, double delay_fraction,
                                  double finetune_fraction);
/// The width actually used: round(W * scale / size_increment) * size_increment, halves to even (Python's round).
int64_t pinned_width(int64_t width, double scale, int64_t size_increment);

}  // namespace functional

namespace algorithms {

struct ProgressiveResizingOptions {
  TORCH_ARG(functional::ResizeMode, mode) = functional::ResizeMode::RESIZE;
  /// Scale at the start, in (0, 1].
  TORCH_ARG(double, initial_scale) = 0.5;
  /// Fraction of training at full size at the end.
  TORCH_ARG(double, finetune_fraction) = 0.2;
  /// Fraction of training at initial_scale at the start.
  TORCH_ARG(double, delay_fraction) = 0.5;
  /// Sizes are multiples of this many pixels.
  TORCH_ARG(int64_t, size_increment) = 4;
  TORCH_ARG(bool, resize_targets) = false;
  TORCH_ARG(BatchKey, input_key) = BatchKey{int64_t{0}};
  TORCH_ARG(BatchKey, target_key) = BatchKey{int64_t{1}};

 public:
  void validate() const;
  /// The field list: repr, YAML and repr parsing, hyperparameter logging and the docs table (core/fields.h).
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("mode", self.mode_, "'resize' (interpolate) or 'crop'");
    visit("initial_scale", self.initial_scale_, "scale at the start, in (0, 1]");
    visit("finetune_fraction", self.finetune_fraction_, "fraction of training at full size at the end");
    visit("delay_fraction", self.delay_fraction_, "fraction of training at initial_scale at the start");
    visit("size_increment", self.size_increment_, "sizes are multiples of this many pixels");
    visit("resize_targets", self.resize_targets_, "resize the targets too (segmentation)");
    visit("input_key", self.input_key_, "batch field of the images");
    visit("target_key", self.target_key_, "batch field of the targets");
  }
};

/// AFTER_DATALOADER: resizes the batch to the scheduled size (needs max_duration). Logs `progressive_resizing/height`,
/// `progressive_resizing/width` and `progressive_resizing/scale_factor` (the scheduled factor before pinning, as
/// Composer logs it).
class ProgressiveResizing : public Algorithm {
 public:
  explicit ProgressiveResizing(ProgressiveResizingOptions options = {});
  bool match(Event event, const State& state) override;
  std::optional<int> apply(Event event, State& state, Logger& logger) override;
  std::string repr() const override;

 private:
  ProgressiveResizingOptions options_;
};

}  // namespace algorithms
}  // namespace composer
