#include "composer/metrics/segmentation.h"

#include <ATen/ATen.h>

#include <cmath>
#include <limits>
#include <stdexcept>

namespace composer {
namespace {

// Composer's torch.histc(x, bins=C, min=0, max=C-1) of class indices: a count per class, values outside dropped.
at::Tensor class_counts(const at::Tensor& classes, int64_t num_classes) {
  const at::Tensor in_range = classes.masked_select((classes >= 0) & (classes < num_classes));
  return at::bincount(in_range.to(at::kLong), {}, num_classes).to(at::kDouble);
}

void require_positive(int64_t n, const std::string& metric) {
  if (n < 1) throw std::invalid_argument(metric + ".num_classes must be >= 1, got " + std::to_string(n));
}

}  // namespace

MIoU::MIoU(int64_t num_classes, int64_t ignore_index)
    : Metric(2 * num_classes), num_classes_(num_classes), ignore_index_(ignore_index) {
  require_positive(num_classes, "MIoU");
}

// State: the intersection per class, then the union per class.
void MIoU::update(const at::Tensor& logits, const at::Tensor& targets) {
  if (logits.dim() != targets.dim() + 1 || logits.size(0) != targets.size(0)) {
    throw std::invalid_argument("MIoU: logits [N, C, ...] need targets [N, ...] of one dimension fewer");
  }
  const at::Tensor preds = logits.argmax(1);
  const at::Tensor mask = targets != ignore_index_;
  const at::Tensor p = preds.masked_select(mask), t = targets.masked_select(mask);
  const at::Tensor intersect = class_counts(p.masked_select(p == t), num_classes_);
  const at::Tensor uni = class_counts(p, num_classes_) + class_counts(t, num_classes_) - intersect;
  accumulate(at::cat({intersect, uni}));
}

double MIoU::compute() const {
  const at::Tensor s = state().to(at::kCPU);
  const at::Tensor intersect = s.narrow(0, 0, num_classes_), uni = s.narrow(0, num_classes_, num_classes_);
  const at::Tensor present = uni != 0;
  if (!present.any().item<bool>()) return std::numeric_limits<double>::quiet_NaN();
  return 100.0 * (intersect.masked_select(present) / uni.masked_select(present)).mean().item<double>();
}

Dice::Dice(int64_t num_classes) : Metric(num_classes + 1), num_classes_(num_classes) {
  require_positive(num_classes, "Dice");
}

// State: the updates seen, then the summed score of each foreground class (Composer's float32 scores).
void Dice::update(const at::Tensor& logits, const at::Tensor& targets) {
  if (logits.dim() < 2 || logits.size(1) != num_classes_ + 1) {
    throw std::invalid_argument("Dice: logits need " + std::to_string(num_classes_ + 1) +
                                " channels in dim 1 (background and " + std::to_string(num_classes_) +
                                " classes), got a tensor of " + std::to_string(logits.dim()) + " dimensions" +
                                (logits.dim() >= 2 ? " with " + std::to_string(logits.size(1)) + " channels" : ""));
  }
  const at::Tensor preds = logits.dim() == targets.dim() + 1 ? logits.argmax(1) : logits;
  at::Tensor scores = at::zeros({num_classes_ + 1}, at::TensorOptions().dtype(at::kFloat));
  scores[0] = 1;  // this update
  for (int64_t i = 1; i <= num_classes_; ++i) {
    const at::Tensor target_i = targets == i, pred_i = preds == i;
    if (!target_i.any().item<bool>()) {
      scores[i] = pred_i.any().item<bool>() ? 0.0 : 1.0;
      continue;
    }
    const int64_t tp = (pred_i & target_i).sum().item<int64_t>();
    const int64_t fp = (pred_i & ~target_i).sum().item<int64_t>();
    const int64_t fn = (~pred_i & target_i).sum().item<int64_t>();
    const int64_t denominator = 2 * tp + fp + fn;
    scores[i] = denominator ? static_cast<float>(2 * tp) / static_cast<float>(denominator) : 0.0f;
  }
  accumulate(scores);
}

double Dice::compute() const {
  const at::Tensor s = state().to(at::kCPU).to(at::kFloat);  // Composer's float32 state
  const at::Tensor dice = 100 * s.narrow(0, 1, num_classes_) / s[0];
  return std::round(dice.mean().item<double>() * 100.0) / 100.0;
}

}  // namespace composer
