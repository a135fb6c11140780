// Classification metrics: Accuracy (top-k), BinaryAccuracy, CrossEntropy, LossMetric.
#pragma once

#include "composer/metrics/metric.h"

#include <functional>

namespace composer {

/// Fraction of samples whose target is among the top-k predictions. Dense (probability) targets use their argmax.
/// Key "Accuracy" (Composer's torchmetrics key is "MulticlassAccuracy").
class Accuracy : public Metric {
 public:
  explicit Accuracy(int64_t top_k = 1);
  std::string name() const override { return "Accuracy"; }
  void update(const at::Tensor& preds, const at::Tensor& target) override;
  double compute() const override;
  std::shared_ptr<Metric> clone_empty() const override { return std::make_shared<Accuracy>(top_k_); }

 private:
  int64_t top_k_;
};

/// Fraction of 0/1 targets matched (torchmetrics' BinaryAccuracy): floating predictions outside [0, 1] go through
/// a sigmoid, then count as 1 above `threshold`; integer predictions are labels. Key "BinaryAccuracy".
class BinaryAccuracy : public Metric {
 public:
  explicit BinaryAccuracy(double threshold = 0.5);
  std::string name() const override { return "BinaryAccuracy"; }
  /// Throws std::invalid_argument when a target is not 0 or 1, or the shapes differ.
  void update(const at::Tensor& preds, const at::Tensor& target) override;
  double compute() const override;
  std::shared_ptr<Metric> clone_empty() const override { return std::make_shared<BinaryAccuracy>(threshold_); }

 private:
  double threshold_;
};

/// Mean over batches of the cross-entropy of each batch (Composer's CrossEntropy).
class CrossEntropy : public Metric {
 public:
  explicit CrossEntropy(int64_t ignore_index = -100);
  std::string name() const override { return "CrossEntropy"; }
  void update(const at::Tensor& preds, const at::Tensor& target) override;
  double compute() const override;
  std::shared_ptr<Metric> clone_empty() const override { return std::make_shared<CrossEntropy>(ignore_index_); }

 private:
  int64_t ignore_index_;
};

/// Mean over batches of a loss function (Composer's LossMetric).
class LossMetric : public Metric {
 public:
  using LossFunction = std::function<at::Tensor(const at::Tensor& preds, const at::Tensor& target)>;
  LossMetric(LossFunction loss_function, std::string name = "LossMetric");
  std::string name() const override { return name_; }
  void update(const at::Tensor& preds, const at::Tensor& target) override;
  double compute() const override;
  std::shared_ptr<Metric> clone_empty() const override { return std::make_shared<LossMetric>(fn_, name_); }

 private:
  LossFunction fn_;
  std::string name_;
};

}  // namespace composer
