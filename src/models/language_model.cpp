#include "composer/models/language_model.h"

#include "composer/metrics/language.h"
#include "composer/nn/tensor_parallel_plan.h"
#include "models/detail/seen_through.h"

#include <torch/torch.h>

namespace composer {
namespace {

// The model's head when tensor parallelism splits its logits over the vocabulary (nn::SplitLogits), looking through
// wrappers; null otherwise.
nn::SplitLogits* split_logits_of(const nn::Layer& model) {
  for (const auto& module : model.modules(/*include_self=*/false)) {
    if (const auto* layer = dynamic_cast<const nn::Layer*>(module.get()))
      if (auto* split = models::detail::seen_through<nn::SplitLogits>(*layer)) return split;
  }
  return nullptr;
}

// Whether `logits` are a slice of the vocabulary (a training forward under loss parallelism).
nn::SplitLogits* split_of(const nn::Layer& model, const at::Tensor& logits) {
  nn::SplitLogits* split = split_logits_of(model);
  return split && logits.size(-1) != split->vocabulary_size() ? split : nullptr;
}

}  // namespace

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
  if (nn::SplitLogits* split = split_of(*model_, logits))
    return split->cross_entropy(logits.to(dtype), labels, ignore_index_, /*mean=*/true);
  return at::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}).to(dtype), labels.reshape({-1}), {},
                                at::Reduction::Mean, ignore_index_);
}

void ComposerLanguageModel::update_metric(const Batch& batch, const at::Tensor& outputs, Metric& metric) {
  const at::Tensor& labels = batch.at(std::string("labels"));
  nn::SplitLogits* split = split_of(*model_, outputs);
  if (!split) return metric.update(outputs, labels);
  at::NoGradGuard no_grad;
  if (auto* entropy = dynamic_cast<LanguageCrossEntropy*>(&metric)) {  // from the slices, as the loss
    const at::Tensor logits = outputs.detach().to(at::promote_types(outputs.scalar_type(), at::kFloat));
    return entropy->update_from_sum(split->cross_entropy(logits, labels, ignore_index_, /*mean=*/false),
                                    labels.ne(ignore_index_).sum());
  }
  metric.update(split->whole_logits(outputs.detach()), labels);
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
