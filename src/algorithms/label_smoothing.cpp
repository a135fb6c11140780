#include "composer/algorithms/label_smoothing.h"

#include "algorithms/detail/common.h"
#include "composer/core/fields.h"
#include "composer/core/state.h"

#include <torch/torch.h>

namespace composer {
namespace functional {

at::Tensor ensure_targets_one_hot(const at::Tensor& logits, const at::Tensor& target) {
  if (target.sizes() == logits.sizes() && target.is_floating_point()) return target;
  if (target.is_floating_point()) {
    throw std::invalid_argument("ensure_targets_one_hot: dense targets of shape " + c10::str(target.sizes()) +
                                " do not match logits of shape " + c10::str(logits.sizes()));
  }
  if (logits.dim() != target.dim() + 1) {
    throw std::invalid_argument("ensure_targets_one_hot: index targets of shape " + c10::str(target.sizes()) +
                                " need logits with one more (class) dimension, got " + c10::str(logits.sizes()));
  }
  const int64_t classes = logits.size(1);
  const int64_t max_index = target.numel() > 0 ? target.max().item<int64_t>() : -1;
  if (max_index >= classes) {
    throw std::invalid_argument("ensure_targets_one_hot: target index " + std::to_string(max_index) +
                                " is out of range for logits with " + std::to_string(classes) + " classes");
  }
  // Negative indices (an ignore_index such as -100) become all-zero rows, as in Composer.
  const at::Tensor ignored = target < 0;
  at::Tensor onehot = at::one_hot(target.masked_fill(ignored, 0), classes).to(logits.scalar_type());
  onehot.masked_fill_(ignored.unsqueeze(-1), 0);
  if (onehot.dim() > 2) onehot = onehot.movedim(-1, 1);  // [N, d..., K] -> [N, K, d...]
  return onehot;
}

at::Tensor smooth_labels(const at::Tensor& logits, const at::Tensor& target, double smoothing) {
  algorithms::detail::require_range("smooth_labels", "smoothing", smoothing, 0.0, 1.0, false, false);
  const at::Tensor onehot = ensure_targets_one_hot(logits, target);
  return onehot * (1.0 - smoothing) + smoothing / static_cast<double>(logits.size(1));
}

}  // namespace functional

namespace algorithms {

void LabelSmoothingOptions::validate() const {
  detail::require_range("LabelSmoothing", "smoothing", smoothing_, 0.0, 1.0, false, false);
}

LabelSmoothing::LabelSmoothing(LabelSmoothingOptions options) : options_(std::move(options)) { options_.validate(); }

bool LabelSmoothing::match(Event event, const State&) {
  return event == Event::BEFORE_LOSS || event == Event::AFTER_LOSS;
}

std::optional<int> LabelSmoothing::apply(Event event, State& state, Logger&) {
  at::Tensor& target = detail::batch_field(state.batch, options_.target_key(), "LabelSmoothing");
  if (event == Event::BEFORE_LOSS) {
    original_ = target;
    state.batch.set(options_.target_key(), functional::smooth_labels(state.outputs, target, options_.smoothing()));
  } else if (original_.defined()) {
    state.batch.set(options_.target_key(), original_);
    original_ = at::Tensor();
  }
  return std::nullopt;
}

std::string LabelSmoothing::repr() const { return options_repr("LabelSmoothing", options_); }

}  // namespace algorithms
}  // namespace composer
