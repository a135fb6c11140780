// ImageVisualizer: logs a few of the batch's images at an interval (Composer's ImageVisualizer).
#pragma once

#include "composer/core/callback.h"
#include "composer/core/fields.h"
#include "composer/core/time.h"
#include "composer/data/batch.h"

#include <torch/arg.h>

#include <string>

namespace composer {

struct ImageVisualizerOptions {
  /// How often to log training images (a bare integer counts batches; units ba or ep).
  TORCH_ARG(Time, interval) = Time::from_batch(100);
  /// "input" (the images) or "segmentation" (also the predicted and true masks).
  TORCH_ARG(std::string, mode) = "input";
  /// At most this many images of the batch.
  TORCH_ARG(int64_t, num_images) = 8;
  /// The images are [N, H, W, C] rather than [N, C, H, W].
  TORCH_ARG(bool, channels_last) = false;
  /// The batch field holding the images, and (segmentation) the target masks.
  TORCH_ARG(BatchKey, input_key) = int64_t{0};
  TORCH_ARG(BatchKey, target_key) = int64_t{1};

 public:
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("interval", ensure_time(TimeUnit::BATCH, self.interval_), "how often to log training images");
    visit("mode", self.mode_, "input, or segmentation (also the masks)");
    visit("num_images", self.num_images_, "images logged at most");
    visit("channels_last", self.channels_last_, "images are [N, H, W, C]");
    visit("input_key", self.input_key_, "batch field of the images");
    visit("target_key", self.target_key_, "batch field of the target masks (segmentation)");
  }
};

/// Training: at BEFORE_FORWARD ("input") or BEFORE_LOSS ("segmentation") of the first microbatch whenever the
/// count in the interval's unit is a multiple of it, logs the first num_images images of the batch as "Images/Train";
/// evaluation: at the first batch of each evaluation (EVAL_BEFORE_FORWARD, or EVAL_AFTER_FORWARD for segmentation),
/// "Images/Eval". A field that is not an image batch (3 or 4 dimensions, more than one value per sample) is skipped,
/// as in Composer. Segmentation also logs the predicted classes (argmax of the outputs over the class dimension) as
/// "<name>/prediction" and the targets (one-hot targets by argmax; negative labels as num_classes) as
/// "<name>/ground_truth", class-index images of shape [N, 1, H, W], since our destinations have no mask overlays.
class ImageVisualizer : public Callback {
 public:
  /// Throws std::invalid_argument naming the field: a mode other than input/segmentation, an interval not in ba or
  /// ep or below 1, num_images below 1.
  explicit ImageVisualizer(ImageVisualizerOptions options = {});
  void before_forward(State& state, Logger& logger) override;
  void before_loss(State& state, Logger& logger) override;
  void eval_before_forward(State& state, Logger& logger) override;
  void eval_after_forward(State& state, Logger& logger) override;

 private:
  bool due(const State& state);
  void log_inputs(const State& state, Logger& logger, const std::string& name) const;
  void log_segmentation(const State& state, Logger& logger, const std::string& name) const;
  ImageVisualizerOptions options_;
  bool segmentation_ = false;
  int64_t last_logged_ = -1;
};

}  // namespace composer
