#include "composer/algorithms/augmix.h"

#include "algorithms/detail/common.h"
#include "algorithms/detail/transforms.h"
#include "composer/core/fields.h"
#include "composer/core/state.h"

#include <torch/torch.h>

namespace composer {
namespace functional {

void AugMixOptions::validate() const {
  algorithms::detail::require_range("AugMix", "severity", severity_, 0.0, 10.0);
  if (width_ < 1) algorithms::detail::bad_option("AugMix", "width", ">= 1", static_cast<double>(width_));
  algorithms::detail::require_range("AugMix", "alpha", alpha_, 0.0, INFINITY, true);
  functional::augmentation_set(augmentation_set_);
}

at::Tensor augmix_image(const at::Tensor& image, const AugMixOptions& options, at::Generator& gen) {
  const std::vector<Augmentation> ops = augmentation_set(options.augmentation_set());
  const std::vector<double> weights = algorithms::detail::sample_dirichlet(options.alpha(), options.width(), gen);
  const double m = algorithms::detail::sample_beta(options.alpha(), options.alpha(), gen);
  const at::Tensor x = image.to(at::kFloat);
  at::Tensor mix = at::zeros_like(x);
  for (int64_t chain = 0; chain < options.width(); ++chain) {
    const int64_t depth = options.depth() > 0 ? options.depth() : algorithms::detail::randint(1, 4, gen);
    mix +=
        augment_chain(image, ops, depth, options.severity(), gen).to(at::kFloat) * weights[static_cast<size_t>(chain)];
  }
  const at::Tensor mixed = x * (1.0 - m) + mix * m;
  if (at::isFloatingType(image.scalar_type())) return mixed.clamp(0, 1).to(image.scalar_type());
  return mixed.clamp(0, 255).floor().to(image.scalar_type());  // np.uint8 truncates
}

BatchTransform augmix_transform(const AugMixOptions& options) {
  options.validate();
  return algorithms::detail::per_image_transform(
      [options](const at::Tensor& image, at::Generator& gen) { return augmix_image(image, options, gen); });
}

}  // namespace functional

namespace algorithms {

AugMix::AugMix(AugMixOptions options) : options_(std::move(options)) { options_.validate(); }

bool AugMix::match(Event event, const State&) { return event == Event::FIT_START && !added_; }

std::optional<int> AugMix::apply(Event, State& state, Logger&) {
  detail::add_train_transform(state, "AugMix", functional::augmix_transform(options_));
  added_ = true;
  return std::nullopt;
}

std::string AugMix::repr() const { return options_repr("AugMix", options_); }

}  // namespace algorithms
}  // namespace composer
