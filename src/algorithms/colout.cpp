#include "composer/algorithms/colout.h"

#include "algorithms/detail/common.h"
#include "algorithms/detail/transforms.h"
#include "composer/core/fields.h"
#include "composer/core/state.h"

#include <torch/torch.h>

namespace composer {
namespace functional {
namespace {

at::Tensor kept_indices(int64_t size, double p, const std::optional<at::Generator>& gen, const c10::Device& device) {
  const int64_t kept = static_cast<int64_t>((1.0 - p) * static_cast<double>(size));
  const auto opts = at::TensorOptions().dtype(at::kLong);
  const at::Tensor perm = gen ? at::randperm(size, *gen, opts) : at::randperm(size, opts);
  return std::get<0>(perm.narrow(0, 0, kept).sort()).to(device);
}

}  // namespace

std::pair<at::Tensor, at::Tensor> colout_batch(const at::Tensor& input, const at::Tensor& target, double p_row,
                                               double p_col, ResizeTarget resize_target,
                                               std::optional<at::Generator> gen) {
  if (input.dim() < 2)
    throw std::invalid_argument("colout_batch: input must be [..., H, W], got shape " + c10::str(input.sizes()));
  algorithms::detail::require_range("colout_batch", "p_row", p_row, 0.0, 1.0, false, true);
  algorithms::detail::require_range("colout_batch", "p_col", p_col, 0.0, 1.0, false, true);
  const int64_t h = input.size(-2), w = input.size(-1);
  const at::Tensor rows = kept_indices(h, p_row, gen, input.device());
  const at::Tensor cols = kept_indices(w, p_col, gen, input.device());
  const at::Tensor out = input.index_select(-2, rows).index_select(-1, cols);
  bool crop_target = resize_target == ResizeTarget::YES;
  if (resize_target == ResizeTarget::AUTO && target.defined()) {
    crop_target = target.dim() >= 2 && target.size(-2) == h && target.size(-1) == w;
  }
  if (crop_target && !target.defined())
    throw std::invalid_argument("colout_batch: resize_target is Yes but no target was given");
  at::Tensor new_target = target;
  if (crop_target)
    new_target = target.index_select(-2, rows.to(target.device())).index_select(-1, cols.to(target.device()));
  return {out, new_target};
}

BatchTransform colout_transform(double p_row, double p_col) {
  algorithms::detail::require_range("colout_transform", "p_row", p_row, 0.0, 1.0, false, true);
  algorithms::detail::require_range("colout_transform", "p_col", p_col, 0.0, 1.0, false, true);
  return algorithms::detail::per_image_transform([p_row, p_col](const at::Tensor& image, at::Generator& gen) {
    return colout_batch(image, {}, p_row, p_col, ResizeTarget::NO, gen).first;
  });
}

namespace {
const std::vector<std::pair<std::string, ResizeTarget>> kResizeTargets{
    {"auto", ResizeTarget::AUTO}, {"true", ResizeTarget::YES}, {"false", ResizeTarget::NO}};
}  // namespace

// Composer's repr shows the Python value: 'auto', True or False (kept quoted as this library always wrote it).
std::string field_text(ResizeTarget value) {
  return value == ResizeTarget::AUTO ? "'auto'" : value == ResizeTarget::YES ? "'True'" : "'False'";
}
void read_field(Hparams& hparams, const std::string& key, ResizeTarget& value) {
  read_choice(hparams, key, value, kResizeTargets);
}

}  // namespace functional

namespace algorithms {

void ColOutOptions::validate() const {
  detail::require_range("ColOut", "p_row", p_row_, 0.0, 1.0, false, true);
  detail::require_range("ColOut", "p_col", p_col_, 0.0, 1.0, false, true);
}

ColOut::ColOut(ColOutOptions options) : options_(std::move(options)) { options_.validate(); }

bool ColOut::match(Event event, const State&) {
  return options_.batch() ? event == Event::AFTER_DATALOADER : (event == Event::FIT_START && !transform_added_);
}

std::optional<int> ColOut::apply(Event, State& state, Logger&) {
  if (!options_.batch()) {
    detail::add_train_transform(state, "ColOut", functional::colout_transform(options_.p_row(), options_.p_col()));
    transform_added_ = true;
    return std::nullopt;
  }
  const at::Tensor& input = detail::batch_field(state.batch, options_.input_key(), "ColOut");
  at::Tensor target;
  if (state.batch.size() > 1 || options_.resize_target() == functional::ResizeTarget::YES) {
    target = detail::batch_field(state.batch, options_.target_key(), "ColOut");
  }
  auto [x, y] = functional::colout_batch(input, target, options_.p_row(), options_.p_col(), options_.resize_target());
  state.batch.set(options_.input_key(), x);
  if (y.defined()) state.batch.set(options_.target_key(), y);
  return std::nullopt;
}

std::string ColOut::repr() const { return options_repr("ColOut", options_); }

}  // namespace algorithms
}  // namespace composer
