// ComposerModel: a torch::nn::Module that knows its loss and metrics, so the Trainer can drive it.
#pragma once

#include "composer/core/state.h"
#include "composer/data/batch.h"
#include "composer/loss/loss.h"

#include <torch/nn/module.h>

#include <map>
#include <optional>
#include <string>

namespace composer {

class ComposerModel : public torch::nn::Module {
 public:
  /// Model outputs for a (micro)batch.
  virtual at::Tensor forward(const Batch& batch) = 0;
  /// The scalar loss to minimise. Override this, or losses() for a model with several.
  virtual at::Tensor loss(const at::Tensor& outputs, const Batch& batch);
  /// Named losses, as Composer's loss() returning a dict: "total" (when present) is what backpropagates, else the
  /// sum of the losses' means; each is logged as loss/train/<name>. Default: {"total": loss(outputs, batch)}.
  virtual std::map<std::string, at::Tensor> losses(const at::Tensor& outputs, const Batch& batch);
  /// One loss per sample, [N] (Composer's loss(outputs, batch, reduction='none')), for methods that rank samples
  /// (SelectiveBackprop). Default: throws std::invalid_argument naming the model.
  virtual at::Tensor per_sample_loss(const at::Tensor& outputs, const Batch& batch);
  /// Outputs for evaluation; `outputs`, when defined, are reused (train metrics reuse the training forward).
  virtual at::Tensor eval_forward(const Batch& batch, const at::Tensor& outputs = {});
  /// Updates `metric` from a batch and its outputs. Default: metric.update(outputs, batch target).
  virtual void update_metric(const Batch& batch, const at::Tensor& outputs, Metric& metric);
  /// Fresh metrics: training ones when is_train, else evaluation ones. Default: none.
  virtual MetricMap get_metrics(bool is_train);
  /// Floating-point operations of one batch (forward + backward), when known (SpeedMonitor's MFU).
  virtual std::optional<double> flops_per_batch(const Batch& batch);
};

/// Wraps any module mapping inputs to logits; batch = {input, target}. Train metric Accuracy; eval metrics
/// Accuracy and CrossEntropy.
class ComposerClassifier : public ComposerModel {
 public:
  using LossFunction = std::function<at::Tensor(const at::Tensor& logits, const at::Tensor& target)>;
  /// `module` must be a torch module holder or shared_ptr whose forward takes one tensor.
  ComposerClassifier(std::shared_ptr<torch::nn::Module> module, std::function<at::Tensor(const at::Tensor&)> forward_fn,
                     LossFunction loss_fn = nullptr);

  /// Convenience for any torch::nn::ModuleHolder / shared_ptr<M> with `at::Tensor forward(at::Tensor)`.
  template <class ModulePtr>
  static std::shared_ptr<ComposerClassifier> wrap(ModulePtr module, LossFunction loss_fn = nullptr) {
    auto ptr = as_shared(module);
    auto* raw = ptr.get();
    return std::make_shared<ComposerClassifier>(
        ptr, [raw](const at::Tensor& x) { return raw->forward(x); }, std::move(loss_fn));
  }

  at::Tensor forward(const Batch& batch) override;
  at::Tensor loss(const at::Tensor& outputs, const Batch& batch) override;
  /// soft_cross_entropy per sample; throws std::invalid_argument with a custom loss function (it has no reduction).
  at::Tensor per_sample_loss(const at::Tensor& outputs, const Batch& batch) override;
  MetricMap get_metrics(bool is_train) override;
  torch::nn::Module& module() { return *module_; }

 private:
  template <class M>
  static std::shared_ptr<M> as_shared(const std::shared_ptr<M>& m) {
    return m;
  }
  template <class H>
  static auto as_shared(const H& holder) -> decltype(holder.ptr()) {
    return holder.ptr();
  }

  std::shared_ptr<torch::nn::Module> module_;
  std::function<at::Tensor(const at::Tensor&)> forward_fn_;
  LossFunction loss_fn_;
  bool default_loss_ = false;
};

}  // namespace composer
