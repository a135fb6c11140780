#include "composer/algorithms/cutmix.h"

#include "algorithms/detail/common.h"
#include "algorithms/detail/mixing.h"
#include "composer/core/fields.h"
#include "composer/core/state.h"

#include <torch/torch.h>

#include <cmath>

namespace composer {
namespace functional {

using algorithms::detail::random_box;

std::tuple<at::Tensor, at::Tensor, double, BoundingBox> cutmix_batch(const at::Tensor& input, const at::Tensor& target,
                                                                     std::optional<int64_t> length, double alpha,
                                                                     std::optional<BoundingBox> bbox,
                                                                     const at::Tensor& indices, bool uniform_sampling) {
  if (input.dim() < 4) {
    throw std::invalid_argument("cutmix_batch: input must be [N, C, H, W, ...], got shape " + c10::str(input.sizes()));
  }
  algorithms::detail::require_range("cutmix_batch", "alpha", alpha, 0.0, INFINITY, true);
  const int64_t h = input.size(2), w = input.size(3);
  const at::Tensor perm =
      indices.defined() ? indices.to(input.device()) : algorithms::detail::randperm(input.size(0), input.device());
  BoundingBox box{};
  if (bbox) {
    box = *bbox;
  } else if (length) {
    if (*length < 0) throw std::invalid_argument("cutmix_batch: length must be >= 0, got " + std::to_string(*length));
    box = random_box(h, w, *length, *length, uniform_sampling);
  } else {
    const double lambda = algorithms::detail::sample_beta(alpha, alpha);
    const double ratio = std::sqrt(1.0 - lambda);
    box = random_box(h, w, static_cast<int64_t>(h * ratio), static_cast<int64_t>(w * ratio), uniform_sampling);
  }
  const auto [x1, y1, x2, y2] = box;
  if (x1 < 0 || y1 < 0 || x2 > h || y2 > w || x1 > x2 || y1 > y2) {
    throw std::invalid_argument("cutmix_batch: bbox (" + std::to_string(x1) + ", " + std::to_string(y1) + ", " +
                                std::to_string(x2) + ", " + std::to_string(y2) + ") is not inside a " +
                                std::to_string(h) + "x" + std::to_string(w) + " image");
  }
  at::Tensor out = input.clone();
  if (x2 > x1 && y2 > y1) {
    out.narrow(2, x1, x2 - x1)
        .narrow(3, y1, y2 - y1)
        .copy_(input.index_select(0, perm).narrow(2, x1, x2 - x1).narrow(3, y1, y2 - y1));
  }
  const double adjusted = 1.0 - static_cast<double>((x2 - x1) * (y2 - y1)) / static_cast<double>(h * w);
  return {out, target.index_select(0, perm.to(target.device())), adjusted, box};
}

}  // namespace functional

namespace algorithms {

void CutMixOptions::validate() const { detail::require_range("CutMix", "alpha", alpha_, 0.0, INFINITY, true); }

CutMix::CutMix(CutMixOptions options) : options_(std::move(options)) { options_.validate(); }

bool CutMix::match(Event event, const State&) { return detail::mixing_match(event, options_.interpolate_loss()); }

std::optional<int> CutMix::apply(Event event, State& state, Logger&) {
  if (event == Event::BEFORE_FORWARD) {
    at::Tensor& input = detail::batch_field(state.batch, options_.input_key(), "CutMix");
    original_ = detail::batch_field(state.batch, options_.target_key(), "CutMix");
    auto [mixed, permuted, keep, box] = functional::cutmix_batch(input, original_, std::nullopt, options_.alpha(),
                                                                 std::nullopt, {}, options_.uniform_sampling());
    state.batch.set(options_.input_key(), mixed);
    permuted_ = permuted;
    keep_ = keep;
    box_ = box;
    return std::nullopt;
  }
  const at::Tensor& input = detail::batch_field(state.batch, options_.input_key(), "CutMix");
  const bool dense = !original_.is_floating_point() && original_.dim() >= 3 && original_.size(-2) == input.size(2) &&
                     original_.size(-1) == input.size(3);
  if (dense && event == Event::BEFORE_LOSS) {  // Composer: segmentation masks get the same box pasted in
    at::Tensor y = original_.clone();
    const auto [x1, y1, x2, y2] = box_;
    if (x2 > x1 && y2 > y1) {
      y.narrow(-2, x1, x2 - x1)
          .narrow(-1, y1, y2 - y1)
          .copy_(permuted_.narrow(-2, x1, x2 - x1).narrow(-1, y1, y2 - y1));
    }
    state.batch.set(options_.target_key(), y);
    return std::nullopt;
  }
  detail::mix_targets_or_loss(event, state, {original_, permuted_, keep_}, options_.target_key());
  return std::nullopt;
}

std::string CutMix::repr() const { return options_repr("CutMix", options_); }

}  // namespace algorithms
}  // namespace composer
