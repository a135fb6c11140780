#include "composer/algorithms/selective_backprop.h"

#include "algorithms/detail/common.h"
#include "composer/core/autocast.h"
#include "composer/core/fields.h"
#include "composer/core/state.h"
#include "composer/models/composer_model.h"

#include <ATen/ATen.h>

#include <cmath>
#include <memory>
#include <stdexcept>

namespace composer {
namespace functional {
namespace {

// F.interpolate(x, scale_factor=s, mode=linear/bilinear/trilinear, align_corners=False,
// recompute_scale_factor=False): sizes floor(n * s), the kernels told s itself.
at::Tensor scale_input(const at::Tensor& x, double s) {
  auto out = [&](int64_t dim) { return static_cast<int64_t>(std::floor(static_cast<double>(x.size(dim)) * s)); };
  const std::optional<double> scale = s;
  switch (x.dim()) {
    case 3:
      return at::upsample_linear1d(x, at::IntArrayRef(std::vector<int64_t>{out(2)}), false, scale);
    case 4:
      return at::upsample_bilinear2d(x, at::IntArrayRef(std::vector<int64_t>{out(2), out(3)}), false, scale, scale);
    case 5:
      return at::upsample_trilinear3d(x, at::IntArrayRef(std::vector<int64_t>{out(2), out(3), out(4)}), false, scale,
                                      scale, scale);
    default:
      throw std::invalid_argument("select_using_loss: with scale_factor < 1 the input must be 3-, 4- or 5-D, got " +
                                  std::to_string(x.dim()) + "-D");
  }
}

}  // namespace

bool should_selective_backprop(double current_duration, int64_t batch_idx, double start, double end,
                               int64_t interrupt) {
  const bool in_interval = current_duration >= start && current_duration < end;
  const bool is_step = interrupt == 0 || (batch_idx + 1) % interrupt != 0;
  return in_interval && is_step;
}

std::pair<at::Tensor, at::Tensor> select_using_loss(
    const at::Tensor& input, const at::Tensor& target, const std::function<at::Tensor(const at::Tensor&)>& model,
    const std::function<at::Tensor(const at::Tensor& outputs, const at::Tensor& target)>& per_sample_loss, double keep,
    double scale_factor) {
  if (scale_factor > 1) algorithms::detail::bad_option("select_using_loss", "scale_factor", "<= 1", scale_factor);
  if (!(scale_factor > 0)) algorithms::detail::bad_option("select_using_loss", "scale_factor", "> 0", scale_factor);
  algorithms::detail::require_range("select_using_loss", "keep", keep, 0.0, 1.0, /*lo_open=*/true);
  if (!input.defined() || input.dim() < 1 || !target.defined() || target.size(0) != input.size(0)) {
    throw std::invalid_argument("select_using_loss: input and target must share their first (sample) dimension");
  }
  at::NoGradGuard no_grad;
  const int64_t n = input.size(0);
  const at::Tensor x = scale_factor < 1 ? scale_input(input, scale_factor) : input;
  const at::Tensor losses = per_sample_loss(model(x), target);
  if (losses.dim() != 1 || losses.size(0) != n) {
    throw std::invalid_argument("select_using_loss: the per-sample loss must have shape [" + std::to_string(n) +
                                "], got " + c10::str(losses.sizes()));
  }
  const at::Tensor sorted_idx = at::argsort(losses.to(at::kFloat));
  const auto n_select = static_cast<int64_t>(keep * static_cast<double>(n));
  // Rank r of N gets weight ((r + 0.5) / N)^(1 / keep - 1): the higher the loss, the likelier to stay.
  const at::Tensor percs = (at::arange(n, at::kDouble) + 0.5) / static_cast<double>(n);
  at::Tensor probs = percs.pow(1.0 / keep - 1.0);
  probs = probs / probs.sum();
  if (n_select == 0) return {input.narrow(0, 0, 0), target.narrow(0, 0, 0)};
  const at::Tensor chosen = at::multinomial(probs, n_select, /*replacement=*/false);
  const at::Tensor select_idx = sorted_idx.index_select(0, chosen.to(sorted_idx.device()));
  return {input.index_select(0, select_idx.to(input.device())), target.index_select(0, select_idx.to(target.device()))};
}

}  // namespace functional

namespace algorithms {

void SelectiveBackpropOptions::validate() const {
  detail::require_range("SelectiveBackprop", "start", start_, 0.0, 1.0);
  detail::require_range("SelectiveBackprop", "end", end_, start_, 1.0);
  detail::require_range("SelectiveBackprop", "keep", keep_, 0.0, 1.0, /*lo_open=*/true);
  detail::require_range("SelectiveBackprop", "scale_factor", scale_factor_, 0.0, 1.0, /*lo_open=*/true);
  if (interrupt_ < 0) detail::bad_option("SelectiveBackprop", "interrupt", ">= 0", static_cast<double>(interrupt_));
}

SelectiveBackprop::SelectiveBackprop(SelectiveBackpropOptions options) : options_(std::move(options)) {
  options_.validate();
}

bool SelectiveBackprop::match(Event event, const State& state) {
  if (event == Event::INIT) return true;
  if (event != Event::AFTER_DATALOADER || options_.keep() >= 1) return false;
  const auto elapsed = state.get_elapsed_duration();
  if (!elapsed) return false;
  return functional::should_selective_backprop(*elapsed, state.timestamp.batch_in_epoch, options_.start(),
                                               options_.end(), options_.interrupt());
}

std::optional<int> SelectiveBackprop::apply(Event event, State& state, Logger&) {
  if (!state.model) throw std::invalid_argument("SelectiveBackprop: the run has no model");
  ComposerModel& model = *state.model;
  if (event == Event::INIT) return std::nullopt;
  const at::Tensor input = detail::batch_field(state.batch, options_.input_key(), "SelectiveBackprop");
  const at::Tensor target = detail::batch_field(state.batch, options_.target_key(), "SelectiveBackprop");
  const auto autocast = enter_autocast(state.precision, state.device);
  const auto [new_input, new_target] = functional::select_using_loss(
      input, target, [&](const at::Tensor& x) { return model.forward(Batch(x, target)); },
      [&](const at::Tensor& outputs, const at::Tensor& y) { return model.per_sample_loss(outputs, Batch(input, y)); },
      options_.keep(), options_.scale_factor());
  state.batch.set(options_.input_key(), new_input);
  state.batch.set(options_.target_key(), new_target);
  return std::nullopt;
}

std::string SelectiveBackprop::repr() const { return options_repr("SelectiveBackprop", options_); }

}  // namespace algorithms
}  // namespace composer
