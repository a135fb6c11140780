// ComposerLanguageModel: wraps a token model ([B, L] ids -> [B, L, V] logits) for the Trainer.
#pragma once

#include "composer/models/composer_model.h"
#include "composer/nn/layer.h"

namespace composer {

class Tokenizer;

/// Batch: "input_ids" and "labels" ([B, L]; -100 = ignored). Loss: token cross entropy. Metrics:
/// LanguageCrossEntropy (train), LanguageCrossEntropy + LanguagePerplexity (eval), plus MaskedAccuracy when
/// `masked` (BERT-style MLM).
class ComposerLanguageModel : public ComposerModel {
 public:
  explicit ComposerLanguageModel(std::shared_ptr<nn::Layer> model, bool masked = false, int64_t ignore_index = -100);
  at::Tensor forward(const Batch& batch) override;
  at::Tensor loss(const at::Tensor& outputs, const Batch& batch) override;
  void update_metric(const Batch& batch, const at::Tensor& outputs, Metric& metric) override;
  MetricMap get_metrics(bool is_train) override;
  /// 6 * parameters * tokens (forward + backward of the dense layers).
  std::optional<double> flops_per_batch(const Batch& batch) override;
  nn::Layer& model() { return *model_; }
  bool masked() const { return masked_; }
  /// The tokenizer of the model's vocabulary (Composer's HuggingFaceModel.tokenizer), for callbacks that turn text
  /// into ids and back (Generate). The CLI sets the training data's; null when none was given.
  void set_tokenizer(std::shared_ptr<const Tokenizer> tokenizer) { tokenizer_ = std::move(tokenizer); }
  const std::shared_ptr<const Tokenizer>& tokenizer() const { return tokenizer_; }

 private:
  std::shared_ptr<nn::Layer> model_;
  bool masked_;
  int64_t ignore_index_;
  std::shared_ptr<const Tokenizer> tokenizer_;
};

}  // namespace composer
