// Binary-task metrics after torchmetrics': BinaryF1Score (summed counts) and BinaryAUROC (a list state: every
// prediction is kept, and ranks gather them). Predictions are probabilities, or logits when any is outside [0, 1]
// (a sigmoid is applied); targets are 0 or 1.
#pragma once

#include "composer/metrics/metric.h"

namespace composer {

/// 2 tp / (2 tp + fp + fn) over everything seen, 0 when nothing is positive (torchmetrics' BinaryF1Score with
/// zero_division 0). Key "BinaryF1Score".
class BinaryF1Score : public Metric {
 public:
  explicit BinaryF1Score(double threshold = 0.5);
  std::string name() const override { return "BinaryF1Score"; }
  /// Throws std::invalid_argument when a target is not 0 or 1, or the sizes differ.
  void update(const at::Tensor& preds, const at::Tensor& target) override;
  double compute() const override;
  std::shared_ptr<Metric> clone_empty() const override { return std::make_shared<BinaryF1Score>(threshold_); }

 private:
  double threshold_;
};

/// The area under the ROC curve from every (probability, target) pair seen, ties counted as torchmetrics'
/// BinaryAUROC (thresholds=None) counts them; 0 for the missing axis when only one class was seen. Keeps its
/// pairs as rows (a list state), so ranks combine by gathering. Key "BinaryAUROC".
class BinaryAUROC : public Metric {
 public:
  BinaryAUROC();
  std::string name() const override { return "BinaryAUROC"; }
  void update(const at::Tensor& preds, const at::Tensor& target) override;
  double compute() const override;
  std::shared_ptr<Metric> clone_empty() const override { return std::make_shared<BinaryAUROC>(); }
};

}  // namespace composer
