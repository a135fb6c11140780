// Composer's losses (composer.loss): soft_cross_entropy, binary_cross_entropy_with_logits and DiceLoss, with the
// target helpers they share. Each takes class indices or one-hot (dense) targets, as Composer's do; a reduction is
// "mean", "sum" or "none".
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/arg.h>

#include <string>

namespace composer {

/// Whether `reduction` is one a loss takes: "mean", "sum" or "none".
bool is_loss_reduction(const std::string& reduction);

/// Composer's infer_target_type: "one_hot" when the shapes are equal, "indices" when the input has one more
/// dimension; anything else is std::invalid_argument naming both shapes.
std::string infer_target_type(const at::Tensor& input, const at::Tensor& targets);
/// Composer's ensure_targets_one_hot: index targets become float one-hot over `num_classes` (default: the input's
/// dim 1) inserted at dim 1, negative indices all zeros; one-hot targets become float.
at::Tensor ensure_targets_one_hot(const at::Tensor& input, const at::Tensor& targets, int64_t num_classes = -1);

struct SoftCrossEntropyOptions {
  /// Per-class weights, [C]; undefined: none.
  TORCH_ARG(at::Tensor, weight);
  /// Index targets equal to it do not count (index targets only).
  TORCH_ARG(int64_t, ignore_index) = -100;
  /// "mean", "sum" or "none".
  TORCH_ARG(std::string, reduction) = "mean";

 public:
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("ignore_index", self.ignore_index_, "index targets equal to it do not count");
    visit("reduction", self.reduction_, "mean, sum or none");
  }
};

/// Composer's soft_cross_entropy: index targets -> cross entropy; dense targets -> -sum over dim 1 of
/// t * log_softmax, whose mean is scaled by (elements / total target probability).
at::Tensor soft_cross_entropy(const at::Tensor& input, const at::Tensor& target,
                              const SoftCrossEntropyOptions& options);
at::Tensor soft_cross_entropy(const at::Tensor& input, const at::Tensor& target, int64_t ignore_index = -100);
/// soft_cross_entropy with reduction "none" for a classifier's [N, C] logits: one value per sample, [N].
at::Tensor soft_cross_entropy_per_sample(const at::Tensor& input, const at::Tensor& target,
                                         int64_t ignore_index = -100);

struct BinaryCrossEntropyOptions {
  /// Per-element rescaling weight; undefined: none.
  TORCH_ARG(at::Tensor, weight);
  /// Weight of positive examples, one per class; undefined: none.
  TORCH_ARG(at::Tensor, pos_weight);
  /// "sum" (Composer's default), "mean" or "none".
  TORCH_ARG(std::string, reduction) = "sum";
  /// Divide by the batch size (input.size(0)), so the summed loss is per sample.
  TORCH_ARG(bool, scale_by_batch_size) = true;

 public:
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("reduction", self.reduction_, "sum, mean or none");
    visit("scale_by_batch_size", self.scale_by_batch_size_, "divide by the batch size");
  }
};

/// Composer's binary_cross_entropy_with_logits: the targets made one-hot, torch's BCE-with-logits with `reduction`
/// (default "sum"), divided by the batch size when scale_by_batch_size. Call it qualified,
/// composer::binary_cross_entropy_with_logits(x, y): with tensor arguments, argument-dependent lookup also finds
/// LibTorch's at::binary_cross_entropy_with_logits, and a two-argument call is ambiguous.
at::Tensor binary_cross_entropy_with_logits(const at::Tensor& input, const at::Tensor& target,
                                            const BinaryCrossEntropyOptions& options = {});

struct DiceLossOptions {
  /// Apply a sigmoid to the input first.
  TORCH_ARG(bool, sigmoid) = false;
  /// Apply a softmax over dim 1 to the input first (not with sigmoid).
  TORCH_ARG(bool, softmax) = false;
  /// Square the input and target in the union.
  TORCH_ARG(bool, squared_pred) = false;
  /// The Jaccard index (soft IoU) instead of Dice.
  TORCH_ARG(bool, jaccard) = false;
  /// Sum intersection and union over the batch before dividing.
  TORCH_ARG(bool, batch) = false;
  /// Leave classes absent from the target out of the loss.
  TORCH_ARG(bool, ignore_absent_classes) = false;
  /// "mean", "sum" or "none".
  TORCH_ARG(std::string, reduction) = "mean";

 public:
  /// std::invalid_argument for sigmoid and softmax together or an unknown reduction.
  void validate() const;
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("sigmoid", self.sigmoid_, "apply a sigmoid to the input first");
    visit("softmax", self.softmax_, "apply a softmax over the classes first");
    visit("squared_pred", self.squared_pred_, "square input and target in the union");
    visit("jaccard", self.jaccard_, "the Jaccard index (soft IoU) instead of Dice");
    visit("batch", self.batch_, "sum over the batch before dividing");
    visit("ignore_absent_classes", self.ignore_absent_classes_, "leave out classes absent from the target");
    visit("reduction", self.reduction_, "mean, sum or none");
  }
};

/// Composer's DiceLoss (after MONAI's): 1 - (2 intersection + 1e-5) / (union + 1e-5) per sample and class (or per
/// class with batch), reduced. Input [N, C, ...] scores, target indices [N, ...] or one-hot [N, C, ...].
class DiceLoss {
 public:
  explicit DiceLoss(DiceLossOptions options = {});
  at::Tensor operator()(const at::Tensor& input, const at::Tensor& target) const;
  const DiceLossOptions& options() const { return options_; }

 private:
  DiceLossOptions options_;
};

}  // namespace composer
