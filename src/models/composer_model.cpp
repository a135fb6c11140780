#include "composer/models/composer_model.h"

#include "composer/metrics/classification.h"

#include <torch/torch.h>

#include <stdexcept>

namespace composer {

at::Tensor ComposerModel::eval_forward(const Batch& batch, const at::Tensor& outputs) {
  return outputs.defined() ? outputs : forward(batch);
}

void ComposerModel::update_metric(const Batch& batch, const at::Tensor& outputs, Metric& metric) {
  metric.update(outputs, batch.target());
}

at::Tensor ComposerModel::loss(const at::Tensor&, const Batch&) {
  throw std::logic_error(name() + ": a ComposerModel must override loss() or losses()");
}

std::map<std::string, at::Tensor> ComposerModel::losses(const at::Tensor& outputs, const Batch& batch) {
  return {{"total", loss(outputs, batch)}};
}

at::Tensor ComposerModel::per_sample_loss(const at::Tensor&, const Batch&) {
  throw std::invalid_argument(name() + " has no per-sample loss: override ComposerModel::per_sample_loss");
}

MetricMap ComposerModel::get_metrics(bool) { return {}; }

std::optional<double> ComposerModel::flops_per_batch(const Batch&) { return std::nullopt; }

ComposerClassifier::ComposerClassifier(std::shared_ptr<torch::nn::Module> module,
                                       std::function<at::Tensor(const at::Tensor&)> forward_fn, LossFunction loss_fn)
    : module_(std::move(module)), forward_fn_(std::move(forward_fn)), loss_fn_(std::move(loss_fn)) {
  if (!module_ || !forward_fn_)
    throw std::invalid_argument("ComposerClassifier: module and forward function must be set");
  register_module("module", module_);
  if (!loss_fn_) {
    loss_fn_ = [](const at::Tensor& l, const at::Tensor& t) { return soft_cross_entropy(l, t); };
    default_loss_ = true;
  }
}

at::Tensor ComposerClassifier::forward(const Batch& batch) { return forward_fn_(batch.input()); }

at::Tensor ComposerClassifier::loss(const at::Tensor& outputs, const Batch& batch) {
  return loss_fn_(outputs, batch.target());
}

at::Tensor ComposerClassifier::per_sample_loss(const at::Tensor& outputs, const Batch& batch) {
  if (!default_loss_) {
    throw std::invalid_argument(
        "ComposerClassifier.per_sample_loss: a custom loss function has no per-sample form; override per_sample_loss");
  }
  return soft_cross_entropy_per_sample(outputs, batch.target());
}

MetricMap ComposerClassifier::get_metrics(bool is_train) {
  MetricMap m;
  auto acc = std::make_shared<Accuracy>();
  m[acc->name()] = acc;
  if (!is_train) {
    auto ce = std::make_shared<CrossEntropy>();
    m[ce->name()] = ce;
  }
  return m;
}

}  // namespace composer
