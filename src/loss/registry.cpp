#include "composer/loss/registry.h"

#include "composer/loss/loss.h"

namespace composer {
namespace {

void check_reduction(Hparams& h, const std::string& reduction) {
  if (!is_loss_reduction(reduction)) h.error("reduction", "'" + reduction + "': expected mean, sum or none");
}

}  // namespace

const LossRegistry& loss_registry() {
  static const LossRegistry registry(
      "loss",
      {
          registry_entry<LossFunction>("soft_cross_entropy", "soft_cross_entropy",
                                       "cross entropy for class indices or one-hot targets", SoftCrossEntropyOptions(),
                                       [](Hparams& h, const SoftCrossEntropyOptions& options) {
                                         check_reduction(h, options.reduction());
                                         return LossFunction(
                                             [options](const at::Tensor& input, const at::Tensor& target) {
                                               return soft_cross_entropy(input, target, options);
                                             });
                                       }),
          registry_entry<LossFunction>(
              "binary_cross_entropy_with_logits", "binary_cross_entropy_with_logits",
              "summed binary cross entropy per sample, targets made one-hot", BinaryCrossEntropyOptions(),
              [](Hparams& h, const BinaryCrossEntropyOptions& options) {
                check_reduction(h, options.reduction());
                return LossFunction([options](const at::Tensor& input, const at::Tensor& target) {
                  return binary_cross_entropy_with_logits(input, target, options);
                });
              }),
          registry_entry<LossFunction>(
              "dice_loss", "DiceLoss", "Dice (or Jaccard) loss for segmentation", DiceLossOptions(),
              [](Hparams& h, const DiceLossOptions& options) {
                check_reduction(h, options.reduction());
                const DiceLoss loss(options);  // validates the rest
                return LossFunction([loss](const at::Tensor& input, const at::Tensor& t) { return loss(input, t); });
              }),
      });
  return registry;
}

}  // namespace composer
