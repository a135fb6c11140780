#include "composer/algorithms/progressive_resizing.h"

#include "algorithms/detail/common.h"
#include "composer/core/fields.h"
#include "composer/core/logger.h"
#include "composer/core/state.h"

#include <torch/torch.h>

#include <cmath>

namespace composer {
namespace functional {
namespace {

at::Tensor nearest(const at::Tensor& x, double s) {
  const int64_t h = static_cast<int64_t>(std::floor(static_cast<double>(x.size(-2)) * s));
  const int64_t w = static_cast<int64_t>(std::floor(static_cast<double>(x.size(-1)) * s));
  if (x.dim() == 4) return at::upsample_nearest2d(x, {h, w}, s, s);
  // [N, H, W] targets (segmentation masks): add a channel dimension for the kernel, as F.interpolate needs.
  const bool integral = !x.is_floating_point();
  at::Tensor y = integral ? x.to(at::kFloat) : x;
  y = at::upsample_nearest2d(y.unsqueeze(1), {h, w}, s, s).squeeze(1);
  return integral ? y.to(x.scalar_type()) : y;
}

}  // namespace

std::pair<at::Tensor, at::Tensor> resize_batch(const at::Tensor& input, const at::Tensor& target, double scale_factor,
                                               ResizeMode mode, bool resize_targets) {
  if (input.dim() != 4)
    throw std::invalid_argument("resize_batch: input must be [N, C, H, W], got shape " + c10::str(input.sizes()));
  if (!(scale_factor > 0)) algorithms::detail::bad_option("resize_batch", "scale_factor", "> 0", scale_factor);
  if (scale_factor >= 1) return {input, target};
  if (resize_targets && (!target.defined() || target.dim() < 3)) {
    throw std::invalid_argument("resize_batch: resize_targets needs image-like targets [N, (C,) H, W]");
  }
  if (mode == ResizeMode::RESIZE)
    return {nearest(input, scale_factor), resize_targets ? nearest(target, scale_factor) : target};
  const int64_t h = input.size(2), w = input.size(3);
  const int64_t ch = static_cast<int64_t>(scale_factor * static_cast<double>(h));
  const int64_t cw = static_cast<int64_t>(scale_factor * static_cast<double>(w));
  // Composer's torch.randint(H - Hc): the top-left corner in [0, H - Hc).
  const int64_t top = algorithms::detail::randint(0, h - ch), left = algorithms::detail::randint(0, w - cw);
  const auto crop = [&](const at::Tensor& t) { return t.narrow(-2, top, ch).narrow(-1, left, cw); };
  return {crop(input), resize_targets ? crop(target) : target};
}

double progressive_resizing_scale(double elapsed, double initial_scale, double delay_fraction,
                                  double finetune_fraction) {
  double f = 0.0;
  if (elapsed >= delay_fraction) {
    const double span = 1.0 - finetune_fraction - delay_fraction;
    f = span > 0 ? std::min((elapsed - delay_fraction) / span, 1.0) : 1.0;
  }
  return initial_scale + (1.0 - initial_scale) * f;
}

int64_t pinned_width(int64_t width, double scale, int64_t size_increment) {
  // Python's round(): halves go to the even neighbour (std::nearbyint in the default rounding mode).
  return static_cast<int64_t>(
             std::nearbyint(static_cast<double>(width) * scale / static_cast<double>(size_increment))) *
         size_increment;
}

namespace {
const std::vector<std::pair<std::string, ResizeMode>> kModes{{"resize", ResizeMode::RESIZE},
                                                             {"crop", ResizeMode::CROP}};
}  // namespace

std::string field_text(ResizeMode value) { return choice_text(value, kModes); }
void read_field(Hparams& hparams, const std::string& key, ResizeMode& value) {
  read_choice(hparams, key, value, kModes);
}

}  // namespace functional

namespace algorithms {

void ProgressiveResizingOptions::validate() const {
  detail::require_range("ProgressiveResizing", "initial_scale", initial_scale_, 0.0, 1.0, true);
  detail::require_range("ProgressiveResizing", "finetune_fraction", finetune_fraction_, 0.0, 1.0);
  detail::require_range("ProgressiveResizing", "delay_fraction", delay_fraction_, 0.0, 1.0);
  if (delay_fraction_ + finetune_fraction_ > 1.0) {
    detail::bad_option("ProgressiveResizing", "delay_fraction + finetune_fraction", "<= 1",
                       delay_fraction_ + finetune_fraction_);
  }
  if (size_increment_ < 1)
    detail::bad_option("ProgressiveResizing", "size_increment", ">= 1", static_cast<double>(size_increment_));
}

ProgressiveResizing::ProgressiveResizing(ProgressiveResizingOptions options) : options_(std::move(options)) {
  options_.validate();
}

bool ProgressiveResizing::match(Event event, const State&) { return event == Event::AFTER_DATALOADER; }

std::optional<int> ProgressiveResizing::apply(Event, State& state, Logger& logger) {
  const auto elapsed = state.get_elapsed_duration();
  if (!elapsed) throw std::invalid_argument("ProgressiveResizing: needs max_duration to schedule the image size");
  const at::Tensor& input = detail::batch_field(state.batch, options_.input_key(), "ProgressiveResizing");
  if (input.dim() != 4) {
    throw std::invalid_argument("ProgressiveResizing: input must be [N, C, H, W], got shape " +
                                c10::str(input.sizes()));
  }
  const double scale = functional::progressive_resizing_scale(*elapsed, options_.initial_scale(),
                                                              options_.delay_fraction(), options_.finetune_fraction());
  const int64_t width = input.size(3);
  const double pinned = static_cast<double>(functional::pinned_width(width, scale, options_.size_increment())) /
                        static_cast<double>(width);
  at::Tensor target;
  if (options_.resize_targets())
    target = detail::batch_field(state.batch, options_.target_key(), "ProgressiveResizing");
  if (pinned > 0 && pinned < 1) {
    auto [x, y] = functional::resize_batch(input, target, pinned, options_.mode(), options_.resize_targets());
    state.batch.set(options_.input_key(), x);
    if (options_.resize_targets()) state.batch.set(options_.target_key(), y);
  }
  const at::Tensor& now = state.batch.at(options_.input_key());
  logger.log_metrics({{"progressive_resizing/height", static_cast<double>(now.size(2))},
                      {"progressive_resizing/width", static_cast<double>(now.size(3))},
                      {"progressive_resizing/scale_factor", scale}});  // Composer logs the unpinned factor
  return std::nullopt;
}

std::string ProgressiveResizing::repr() const { return options_repr("ProgressiveResizing", options_); }

}  // namespace algorithms
}  // namespace composer
