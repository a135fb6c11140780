#include "composer/metrics/binary.h"

#include "metrics/detail/binary_inputs.h"

#include <ATen/ATen.h>

#include <limits>
#include <stdexcept>

namespace composer {

BinaryF1Score::BinaryF1Score(double threshold) : Metric(3), threshold_(threshold) {
  if (!(threshold >= 0 && threshold <= 1)) {
    throw std::invalid_argument("BinaryF1Score.threshold must be in [0, 1], got " + std::to_string(threshold));
  }
}

// State: true positives, false positives, false negatives.
void BinaryF1Score::update(const at::Tensor& preds, const at::Tensor& target) {
  auto [p, t] = detail::binary_inputs(preds, target, "BinaryF1Score");
  const at::Tensor predicted = detail::binary_labels(p, threshold_).eq(1);
  const at::Tensor actual = t.eq(1);
  accumulate(at::stack({(predicted & actual).sum(), (predicted & ~actual).sum(), (~predicted & actual).sum()}));
}

double BinaryF1Score::compute() const {
  const auto s = state_values();
  const double denominator = 2 * s[0] + s[1] + s[2];
  return denominator > 0 ? 2 * s[0] / denominator : 0.0;
}

BinaryAUROC::BinaryAUROC() : Metric(0, /*row_width=*/2) {}

void BinaryAUROC::update(const at::Tensor& preds, const at::Tensor& target) {
  auto [p, t] = detail::binary_inputs(preds, target, "BinaryAUROC");
  append_rows(at::stack({p.detach().to(at::kDouble), t.to(at::kDouble)}, 1));
}

// torchmetrics' _binary_clf_curve: predictions in descending order, one point per distinct value (so ties form one
// step), then the trapezoids under (fpr, tpr) from (0, 0).
double BinaryAUROC::compute() const {
  const at::Tensor r = rows().to(at::kCPU);
  if (r.size(0) == 0) return std::numeric_limits<double>::quiet_NaN();
  const at::Tensor order = r.select(1, 0).argsort(/*stable=*/true, /*dim=*/0, /*descending=*/true);
  const at::Tensor preds = r.select(1, 0).index_select(0, order);
  const at::Tensor target = r.select(1, 1).index_select(0, order);
  const at::Tensor distinct = at::nonzero(preds.diff()).reshape({-1});
  const at::Tensor last = at::full({1}, preds.size(0) - 1, distinct.options());
  const at::Tensor idx = at::cat({distinct, last});
  const at::Tensor tps = target.cumsum(0).index_select(0, idx);
  const at::Tensor fps = 1 + idx.to(at::kDouble) - tps;
  const at::Tensor zero = at::zeros({1}, tps.options());
  at::Tensor tpr = at::cat({zero, tps}), fpr = at::cat({zero, fps});
  const double positives = tpr[-1].item<double>(), negatives = fpr[-1].item<double>();
  fpr = negatives > 0 ? fpr / negatives : at::zeros_like(fpr);
  tpr = positives > 0 ? tpr / positives : at::zeros_like(tpr);
  return at::trapezoid(tpr, fpr).item<double>();
}

}  // namespace composer
