#include "composer/metrics/classification.h"

#include "metrics/detail/binary_inputs.h"

#include <ATen/ATen.h>

#include <limits>
#include <stdexcept>

namespace composer {
namespace {

at::Tensor class_indices(const at::Tensor& target) {
  return target.dim() > 1 && target.is_floating_point() ? target.argmax(-1) : target;
}

// `t` as `dims` dimensions whose last is `last` (-1: any), reshaped only when it is not already (a per-step metric
// update pays for each dispatched op).
at::Tensor shaped(const at::Tensor& t, int64_t dims, int64_t last = -1) {
  if (t.dim() == dims && (last < 0 || t.size(-1) == last)) return t;
  return dims == 1 ? t.reshape({-1}) : t.reshape({-1, last});
}
}  // namespace

Accuracy::Accuracy(int64_t top_k) : Metric(2), top_k_(top_k) {
  if (top_k <= 0) throw std::invalid_argument("Accuracy.top_k must be > 0, got " + std::to_string(top_k));
}

void Accuracy::update(const at::Tensor& preds, const at::Tensor& target) {
  const at::Tensor t = shaped(class_indices(target), 1);
  at::Tensor correct;
  if (preds.dim() == 1 || !preds.is_floating_point()) {
    correct = shaped(preds, 1).eq(t).sum();
  } else {
    const at::Tensor logits = shaped(preds, 2, preds.size(-1));
    const int64_t k = std::min<int64_t>(top_k_, logits.size(1));
    correct = k == 1 ? logits.argmax(1).eq(t).sum() : std::get<1>(logits.topk(k, 1)).eq(t.unsqueeze(1)).any(1).sum();
  }
  accumulate(correct, static_cast<double>(t.numel()));
}

double Accuracy::compute() const { return mean_of_state(); }

BinaryAccuracy::BinaryAccuracy(double threshold) : Metric(2), threshold_(threshold) {
  if (!(threshold >= 0 && threshold <= 1)) {
    throw std::invalid_argument("BinaryAccuracy.threshold must be in [0, 1], got " + std::to_string(threshold));
  }
}

void BinaryAccuracy::update(const at::Tensor& preds, const at::Tensor& target) {
  auto [p, t] = detail::binary_inputs(preds, target, "BinaryAccuracy");
  p = detail::binary_labels(p, threshold_);
  accumulate(p.eq(t.to(p.scalar_type())).sum(), static_cast<double>(t.numel()));
}

double BinaryAccuracy::compute() const { return mean_of_state(); }

CrossEntropy::CrossEntropy(int64_t ignore_index) : Metric(2), ignore_index_(ignore_index) {}

void CrossEntropy::update(const at::Tensor& preds, const at::Tensor& target) {
  at::Tensor loss;
  if (target.is_floating_point() && target.sizes() == preds.sizes()) {
    loss = -(target * preds.log_softmax(-1)).sum(-1).mean();
  } else {
    loss = at::cross_entropy_loss(preds.to(at::kFloat), target, {}, at::Reduction::Mean, ignore_index_);
  }
  accumulate(at::stack({loss.detach().to(at::kDouble), at::ones({}, loss.options().dtype(at::kDouble))}));
}

double CrossEntropy::compute() const { return mean_of_state(); }

LossMetric::LossMetric(LossFunction loss_function, std::string name)
    : Metric(2), fn_(std::move(loss_function)), name_(std::move(name)) {
  if (!fn_) throw std::invalid_argument("LossMetric: loss_function must be set");
}

void LossMetric::update(const at::Tensor& preds, const at::Tensor& target) {
  const at::Tensor loss = fn_(preds, target).detach();
  accumulate(at::stack({loss.mean().to(at::kDouble), at::ones({}, loss.options().dtype(at::kDouble))}));
}

double LossMetric::compute() const { return mean_of_state(); }

}  // namespace composer
