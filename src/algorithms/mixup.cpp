#include "composer/algorithms/mixup.h"

#include "algorithms/detail/common.h"
#include "algorithms/detail/mixing.h"
#include "composer/core/fields.h"
#include "composer/core/state.h"

#include <torch/torch.h>

namespace composer {
namespace functional {

std::tuple<at::Tensor, at::Tensor, double> mixup_batch(const at::Tensor& input, const at::Tensor& target,
                                                       std::optional<double> mixing, double alpha,
                                                       const at::Tensor& indices) {
  algorithms::detail::require_range("mixup_batch", "alpha", alpha, 0.0, INFINITY);
  double m = mixing.value_or(alpha == 0 ? 0.0 : algorithms::detail::sample_beta(alpha, alpha));
  if (!mixing) m = std::min(m, 1.0 - m);
  algorithms::detail::require_range("mixup_batch", "mixing", m, 0.0, 1.0);
  const at::Tensor perm =
      indices.defined() ? indices.to(input.device()) : algorithms::detail::randperm(input.size(0), input.device());
  const at::Tensor mixed = input * (1.0 - m) + input.index_select(0, perm) * m;
  return {mixed, target.index_select(0, perm.to(target.device())), m};
}

}  // namespace functional

namespace algorithms {

void MixUpOptions::validate() const { detail::require_range("MixUp", "alpha", alpha_, 0.0, INFINITY); }

MixUp::MixUp(MixUpOptions options) : options_(std::move(options)) { options_.validate(); }

bool MixUp::match(Event event, const State&) { return detail::mixing_match(event, options_.interpolate_loss()); }

std::optional<int> MixUp::apply(Event event, State& state, Logger&) {
  if (event == Event::BEFORE_FORWARD) {
    at::Tensor& input = detail::batch_field(state.batch, options_.input_key(), "MixUp");
    original_ = detail::batch_field(state.batch, options_.target_key(), "MixUp");
    auto [mixed, permuted, m] = functional::mixup_batch(input, original_, std::nullopt, options_.alpha());
    state.batch.set(options_.input_key(), mixed);
    permuted_ = permuted;
    keep_ = 1.0 - m;
    return std::nullopt;
  }
  detail::mix_targets_or_loss(event, state, {original_, permuted_, keep_}, options_.target_key());
  return std::nullopt;
}

std::string MixUp::repr() const { return options_repr("MixUp", options_); }

}  // namespace algorithms
}  // namespace composer
