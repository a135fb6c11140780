// Language-model metrics over [batch, seq, vocab] logits and [batch, seq] labels.
#pragma once

#include "composer/metrics/metric.h"

namespace composer {

/// Summed token cross-entropy / number of non-ignored tokens.
class LanguageCrossEntropy : public Metric {
 public:
  explicit LanguageCrossEntropy(int64_t ignore_index = -100);
  std::string name() const override { return "LanguageCrossEntropy"; }
  void update(const at::Tensor& logits, const at::Tensor& target) override;
  /// Adds `summed`, the cross entropy summed over `tokens` counted tokens (where the loss has computed it: logits
  /// split over a tensor-parallel group).
  void update_from_sum(const at::Tensor& summed, const at::Tensor& tokens);
  double compute() const override;
  std::shared_ptr<Metric> clone_empty() const override { return std::make_shared<LanguageCrossEntropy>(ignore_index_); }

 protected:
  int64_t ignore_index_;
};

/// exp(LanguageCrossEntropy).
class LanguagePerplexity : public LanguageCrossEntropy {
 public:
  explicit LanguagePerplexity(int64_t ignore_index = -100) : LanguageCrossEntropy(ignore_index) {}
  std::string name() const override { return "LanguagePerplexity"; }
  double compute() const override;
  std::shared_ptr<Metric> clone_empty() const override { return std::make_shared<LanguagePerplexity>(ignore_index_); }
};

/// Accuracy of the argmax over tokens whose label is not ignore_index (masked language modelling).
class MaskedAccuracy : public Metric {
 public:
  explicit MaskedAccuracy(int64_t ignore_index = -100);
  std::string name() const override { return "MaskedAccuracy"; }
  void update(const at::Tensor& logits, const at::Tensor& target) override;
  double compute() const override;
  std::shared_ptr<Metric> clone_empty() const override { return std::make_shared<MaskedAccuracy>(ignore_index_); }

 private:
  int64_t ignore_index_;
};

}  // namespace composer
