// Segmentation metrics, Composer's (composer.metrics): MIoU and Dice. Predictions are logits [N, C, ...]; targets
// class indices [N, ...].
#pragma once

#include "composer/metrics/metric.h"

namespace composer {

/// Mean intersection over union in percent, over the classes that occur in a prediction or a target; pixels whose
/// target is `ignore_index` do not count. Key "MIoU".
class MIoU : public Metric {
 public:
  explicit MIoU(int64_t num_classes, int64_t ignore_index = -1);
  std::string name() const override { return "MIoU"; }
  void update(const at::Tensor& logits, const at::Tensor& targets) override;
  double compute() const override;
  std::shared_ptr<Metric> clone_empty() const override { return std::make_shared<MIoU>(num_classes_, ignore_index_); }

 private:
  int64_t num_classes_, ignore_index_;
};

/// Composer's Dice: per update, the Dice score of each foreground class 1..num_classes (of num_classes + 1 logit
/// channels; 1 for a class absent from both target and prediction); computed as the mean over classes and updates,
/// in percent, rounded to 2 decimals. Key "Dice".
class Dice : public Metric {
 public:
  explicit Dice(int64_t num_classes);
  std::string name() const override { return "Dice"; }
  /// Throws std::invalid_argument unless the logits have num_classes + 1 channels.
  void update(const at::Tensor& logits, const at::Tensor& targets) override;
  double compute() const override;
  std::shared_ptr<Metric> clone_empty() const override { return std::make_shared<Dice>(num_classes_); }

 private:
  int64_t num_classes_;
};

}  // namespace composer
