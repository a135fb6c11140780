#include "composer/algorithms/cutout.h"

#include "algorithms/detail/common.h"
#include "composer/core/fields.h"
#include "composer/core/state.h"

#include <torch/torch.h>

namespace composer {
namespace functional {

at::Tensor cutout_batch(const at::Tensor& input, int64_t num_holes, double length, bool uniform_sampling) {
  if (input.dim() < 3)
    throw std::invalid_argument("cutout_batch: input must be [..., H, W], got shape " + c10::str(input.sizes()));
  if (num_holes < 0)
    throw std::invalid_argument("cutout_batch: num_holes must be >= 0, got " + std::to_string(num_holes));
  algorithms::detail::require_range("cutout_batch", "length", length, 0.0, INFINITY);
  const int64_t h = input.size(-2), w = input.size(-1);
  const int64_t side =
      static_cast<int64_t>(length > 0 && length < 1 ? static_cast<double>(std::min(h, w)) * length : length);
  at::Tensor mask = at::ones({h, w}, input.options());
  for (int64_t i = 0; i < num_holes; ++i) {
    const auto [y1, x1, y2, x2] = algorithms::detail::random_box(h, w, side, side, uniform_sampling);
    if (y2 > y1 && x2 > x1) mask.narrow(0, y1, y2 - y1).narrow(1, x1, x2 - x1).zero_();
  }
  return input * mask;
}

}  // namespace functional

namespace algorithms {

void CutOutOptions::validate() const {
  if (num_holes_ < 1) detail::bad_option("CutOut", "num_holes", ">= 1", static_cast<double>(num_holes_));
  detail::require_range("CutOut", "length", length_, 0.0, INFINITY, true);
}

CutOut::CutOut(CutOutOptions options) : options_(std::move(options)) { options_.validate(); }

bool CutOut::match(Event event, const State&) { return event == Event::AFTER_DATALOADER; }

std::optional<int> CutOut::apply(Event, State& state, Logger&) {
  const at::Tensor& input = detail::batch_field(state.batch, options_.input_key(), "CutOut");
  state.batch.set(options_.input_key(), functional::cutout_batch(input, options_.num_holes(), options_.length(),
                                                                 options_.uniform_sampling()));
  return std::nullopt;
}

std::string CutOut::repr() const { return options_repr("CutOut", options_); }

}  // namespace algorithms
}  // namespace composer
