#include "composer/models/language_model.h"

#include "composer/metrics/language.h"

#include <torch/torch.h>

namespace composer {

ComposerLanguageModel::ComposerLanguageModel(std::shared_ptr<nn::Layer> model, bool masked, int64_t ignore_index)
    : model_(std::move(model)), masked_(masked), ignore_index_(ignore_index) {
  if (!model_) throw std::invalid_argument("ComposerLanguageModel: model must be set");
  register_module("model", model_);
}

at::Tensor ComposerLanguageModel::forward(const Batch& batch) {
  return model_->forward(batch.at(std::string("input_ids")));
}

at::Tensor ComposerLanguageModel::loss(const at::Tensor& logits, const Batch& batch) {
  const at::Tensor& labels = batch.at(std::string("labels"));
  // In float32 at least (bf16/fp16 logits are upcast, as Composer's models do); a float64 model keeps float64.
  const at::ScalarType dtype = at::promote_types(logits.scalar_type(), at::kFloat);
  return at::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}).to(dtype), labels.reshape({-1}), {},
                                at::Reduction::Mean, ignore_index_);
}

void ComposerLanguageModel::update_metric(const Batch& batch, const at::Tensor& outputs, Metric& metric) {
  metric.update(outputs, batch.at(std::string("labels")));
}

MetricMap ComposerLanguageModel::get_metrics(bool is_train) {
  MetricMap m;
  auto add = [&](std::shared_ptr<Metric> metric) { m[metric->name()] = std::move(metric); };
  add(std::make_shared<LanguageCrossEntropy>(ignore_index_));
  if (!is_train) add(std::make_shared<LanguagePerplexity>(ignore_index_));
  if (masked_) add(std::make_shared<MaskedAccuracy>(ignore_index_));
  return m;
}

std::optional<double> ComposerLanguageModel::flops_per_batch(const Batch& batch) {
  double params = 0;
  for (const auto& p : model_->parameters()) params += static_cast<double>(p.numel());
  return 6.0 * params * static_cast<double>(batch.at(std::string("input_ids")).numel());
}

}  // namespace composer
