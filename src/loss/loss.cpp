#include "composer/loss/loss.h"

#include <ATen/ATen.h>

#include <stdexcept>
#include <vector>

namespace composer {
namespace {

std::string shape_text(const at::Tensor& t) {
  std::string out = "[";
  for (int64_t i = 0; i < t.dim(); ++i) out += (i ? ", " : "") + std::to_string(t.size(i));
  return out + "]";
}

int64_t reduction_of(const std::string& reduction, const std::string& loss) {
  if (reduction == "mean") return at::Reduction::Mean;
  if (reduction == "sum") return at::Reduction::Sum;
  if (reduction == "none") return at::Reduction::None;
  throw std::invalid_argument(loss + ": reduction '" + reduction + "'; expected mean, sum or none");
}

at::Tensor reduce(const at::Tensor& values, int64_t reduction) {
  if (reduction == at::Reduction::Mean) return values.mean();
  if (reduction == at::Reduction::Sum) return values.sum();
  return values;
}

// Composer's _one_hot at dim 1: negative indices get an extra class that is dropped again (all zeros).
at::Tensor one_hot_at_dim1(const at::Tensor& targets, int64_t num_classes) {
  if (at::isFloatingType(targets.scalar_type()) || targets.scalar_type() == at::kBool) {
    throw std::invalid_argument("ensure_targets_one_hot: index targets must be an integer type, got " +
                                std::string(c10::toString(targets.scalar_type())));
  }
  if (targets.numel() > 0) {
    const int64_t max_index = targets.max().item<int64_t>() + 1;
    if (num_classes < max_index) {
      throw std::invalid_argument("ensure_targets_one_hot: a target index is " + std::to_string(max_index - 1) +
                                  ", beyond the " + std::to_string(num_classes) + " classes");
    }
  }
  const bool negative = targets.numel() > 0 && targets.min().item<int64_t>() < 0;
  at::Tensor index = targets.to(at::kLong);
  if (negative) index = at::where(index < 0, at::full_like(index, num_classes), index);
  std::vector<int64_t> shape = index.unsqueeze(1).sizes().vec();
  shape[1] = num_classes + (negative ? 1 : 0);
  at::Tensor out = at::zeros(shape, index.options()).scatter_(1, index.unsqueeze(1), 1);
  return negative ? out.narrow(1, 0, num_classes) : out;
}

}  // namespace

bool is_loss_reduction(const std::string& reduction) {
  return reduction == "mean" || reduction == "sum" || reduction == "none";
}

std::string infer_target_type(const at::Tensor& input, const at::Tensor& targets) {
  if (input.sizes() == targets.sizes()) return "one_hot";
  if (input.dim() == targets.dim() + 1) return "indices";
  throw std::invalid_argument("loss targets of shape " + shape_text(targets) + " for inputs of shape " +
                              shape_text(input) +
                              ": expected the same shape (one-hot) or one dimension fewer "
                              "(class indices)");
}

at::Tensor ensure_targets_one_hot(const at::Tensor& input, const at::Tensor& targets, int64_t num_classes) {
  if (infer_target_type(input, targets) == "indices") {
    if (num_classes < 0) num_classes = input.size(1);
    return one_hot_at_dim1(targets, num_classes).to(at::kFloat);
  }
  return targets.to(at::kFloat);
}

at::Tensor soft_cross_entropy(const at::Tensor& input, const at::Tensor& target,
                              const SoftCrossEntropyOptions& options) {
  const int64_t reduction = reduction_of(options.reduction(), "soft_cross_entropy");
  if (infer_target_type(input, target) == "indices") {
    return at::cross_entropy_loss(input, target, options.weight(), reduction, options.ignore_index());
  }
  at::Tensor xentropy = -(target * at::log_softmax(input, 1));
  if (options.weight().defined()) xentropy = (xentropy.movedim(1, -1) * options.weight()).movedim(-1, 1);
  xentropy = xentropy.sum(1);
  if (reduction != at::Reduction::Mean) return reduce(xentropy, reduction);
  const at::Tensor total_prob = target.sum();
  if (total_prob.item<double>() <= 0) throw std::invalid_argument("soft_cross_entropy: no target has probability > 0");
  return xentropy.mean() * (static_cast<double>(xentropy.numel()) / total_prob);
}

at::Tensor soft_cross_entropy(const at::Tensor& input, const at::Tensor& target, int64_t ignore_index) {
  return soft_cross_entropy(input, target, SoftCrossEntropyOptions().ignore_index(ignore_index));
}

at::Tensor soft_cross_entropy_per_sample(const at::Tensor& input, const at::Tensor& target, int64_t ignore_index) {
  return soft_cross_entropy(input, target, SoftCrossEntropyOptions().ignore_index(ignore_index).reduction("none"));
}

at::Tensor binary_cross_entropy_with_logits(const at::Tensor& input, const at::Tensor& target,
                                            const BinaryCrossEntropyOptions& options) {
  const int64_t reduction = reduction_of(options.reduction(), "binary_cross_entropy_with_logits");
  const at::Tensor one_hot = ensure_targets_one_hot(input, target);
  at::Tensor bce =
      at::binary_cross_entropy_with_logits(input, one_hot, options.weight(), options.pos_weight(), reduction);
  if (options.scale_by_batch_size()) bce = bce / static_cast<double>(input.size(0));
  return bce;
}

void DiceLossOptions::validate() const {
  if (sigmoid_ && softmax_) throw std::invalid_argument("DiceLoss: sigmoid and softmax cannot both be true");
  reduction_of(reduction_, "DiceLoss");
}

DiceLoss::DiceLoss(DiceLossOptions options) : options_(std::move(options)) { options_.validate(); }

// Composer's order, kept: the intersection uses the unmasked input, the union the input masked to labelled pixels.
at::Tensor DiceLoss::operator()(const at::Tensor& input_in, const at::Tensor& target_in) const {
  at::Tensor target = ensure_targets_one_hot(input_in, target_in);
  const at::Tensor target_mask = target.sum(1, /*keepdim=*/true) != 0;
  if (input_in.sizes() != target.sizes()) {
    throw std::invalid_argument("DiceLoss: targets of shape " + shape_text(target) + " for inputs of shape " +
                                shape_text(input_in) + "; expected the same shape");
  }
  at::Tensor input = input_in;
  if (options_.sigmoid()) input = at::sigmoid(input);
  if (options_.softmax() && input.size(1) > 1) input = at::softmax(input, 1);
  std::vector<int64_t> axes;
  if (options_.batch()) axes.push_back(0);
  for (int64_t d = 2; d < input.dim(); ++d) axes.push_back(d);
  // torch.sum over an empty dim list sums everything, and so does this (2-D input without batch).
  const auto sum = [&](const at::Tensor& t) { return axes.empty() ? t.sum() : t.sum(axes); };
  const at::Tensor intersection = sum(target * input);
  if (options_.squared_pred()) {
    target = target.pow(2);
    input = input.pow(2);
  }
  input = target_mask * input;
  const at::Tensor ground_o = sum(target);
  at::Tensor union_ = ground_o + sum(input);
  if (options_.jaccard()) union_ = 2.0 * (union_ - intersection);
  constexpr double kEpsilon = 1e-5;
  at::Tensor ious = 1.0 - (2.0 * intersection + kEpsilon) / (union_ + kEpsilon);
  if (options_.ignore_absent_classes()) {
    ious = options_.batch() ? ious.index({ground_o > 0}) : ious.index({at::indexing::Slice(), ground_o.sum(0) > 0});
  }
  return reduce(ious, reduction_of(options_.reduction(), "DiceLoss"));
}

}  // namespace composer
