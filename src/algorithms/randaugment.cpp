#include "composer/algorithms/randaugment.h"

#include "algorithms/detail/common.h"
#include "algorithms/detail/transforms.h"
#include "composer/core/fields.h"
#include "composer/core/state.h"

#include <torch/torch.h>

namespace composer {
namespace functional {

void RandAugmentOptions::validate() const {
  algorithms::detail::require_range("RandAugment", "severity", severity_, 0.0, 10.0);
  if (depth_ < 1) algorithms::detail::bad_option("RandAugment", "depth", ">= 1", static_cast<double>(depth_));
  functional::augmentation_set(augmentation_set_);
}

at::Tensor randaugment_image(const at::Tensor& image, const RandAugmentOptions& options, at::Generator& gen) {
  return augment_chain(image, augmentation_set(options.augmentation_set()), options.depth(), options.severity(), gen);
}

BatchTransform randaugment_transform(const RandAugmentOptions& options) {
  options.validate();
  return algorithms::detail::per_image_transform(
      [options](const at::Tensor& image, at::Generator& gen) { return randaugment_image(image, options, gen); });
}

}  // namespace functional

namespace algorithms {

RandAugment::RandAugment(RandAugmentOptions options) : options_(std::move(options)) { options_.validate(); }

bool RandAugment::match(Event event, const State&) { return event == Event::FIT_START && !added_; }

std::optional<int> RandAugment::apply(Event, State& state, Logger&) {
  detail::add_train_transform(state, "RandAugment", functional::randaugment_transform(options_));
  added_ = true;
  return std::nullopt;
}

std::string RandAugment::repr() const { return options_repr("RandAugment", options_); }

}  // namespace algorithms
}  // namespace composer
