#include "composer/algorithms/gradient_clipping.h"

#include "composer/core/fields.h"
#include "composer/core/state.h"
#include "composer/dist/strategy.h"
#include "composer/models/composer_model.h"

#include <ATen/ATen.h>

#include <limits>
#include <stdexcept>

namespace composer {
namespace functional {
namespace {

const std::vector<std::pair<std::string, ClippingType>> kClippingTypes{
    {"adaptive", ClippingType::ADAPTIVE}, {"norm", ClippingType::NORM}, {"value", ClippingType::VALUE}};

// The L2 norm per unit: the whole tensor for 0-d and 1-d ones, else over every dimension but the first (kept).
at::Tensor unitwise_norm(const at::Tensor& t) {
  if (t.dim() <= 1) return at::linalg_vector_norm(t, 2);
  std::vector<int64_t> dims;
  for (int64_t d = 1; d < t.dim(); ++d) dims.push_back(d);
  return at::linalg_vector_norm(t, 2, dims, /*keepdim=*/true);
}

}  // namespace

std::string field_text(ClippingType value) { return choice_text(value, kClippingTypes); }

void read_field(Hparams& hparams, const std::string& key, ClippingType& value) {
  read_choice(hparams, key, value, kClippingTypes);
}

void apply_gradient_clipping(const std::vector<at::Tensor>& parameters, ClippingType type, double threshold) {
  if (!(threshold > 0)) {
    throw std::invalid_argument("apply_gradient_clipping: clipping_threshold must be > 0, got " +
                                composer::field_text(threshold));
  }
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> params, grads;
  for (const auto& p : parameters) {
    if (!p.grad().defined()) continue;
    params.push_back(p.detach());
    grads.push_back(p.grad());
  }
  if (grads.empty()) return;
  switch (type) {
    case ClippingType::NORM: {
      std::vector<at::Tensor> norms;
      for (const auto& g : grads) norms.push_back(at::linalg_vector_norm(g, 2));
      const at::Tensor total = at::linalg_vector_norm(at::stack(norms), 2);
      const at::Tensor coef = (threshold / (total + 1e-6)).clamp_max(1.0);
      for (auto& g : grads) g.mul_(coef.to(g.device()));
      break;
    }
    case ClippingType::VALUE:
      for (auto& g : grads) g.clamp_(-threshold, threshold);
      break;
    case ClippingType::ADAPTIVE:
      for (size_t i = 0; i < grads.size(); ++i) {
        const at::Tensor coef =
            (unitwise_norm(params[i]) * threshold / unitwise_norm(grads[i])).nan_to_num_(1.0).clamp_max_(1.0);
        grads[i].mul_(coef);
      }
      break;
  }
}

}  // namespace functional

namespace algorithms {

void GradientClippingOptions::validate() const {
  required_value(clipping_type_, "GradientClipping", "clipping_type", "'adaptive', 'norm' or 'value'");
  const double t = required_value(clipping_threshold_, "GradientClipping", "clipping_threshold", "a number > 0");
  if (!(t > 0)) {
    throw std::invalid_argument("GradientClipping.clipping_threshold must be > 0, got " + composer::field_text(t));
  }
}

GradientClipping::GradientClipping(GradientClippingOptions options) : options_(std::move(options)) {
  options_.validate();
}

bool GradientClipping::match(Event event, const State&) {
  return event == Event::INIT || event == Event::AFTER_TRAIN_BATCH;
}

std::optional<int> GradientClipping::apply(Event event, State& state, Logger&) {
  if (event != Event::AFTER_TRAIN_BATCH || !state.model) return std::nullopt;
  if (state.strategy && state.strategy->holds_gradients()) {  // FSDP: as Composer, a norm clip over the shards
    const functional::ClippingType type = *options_.clipping_type();
    if (type == functional::ClippingType::ADAPTIVE) {
      throw std::invalid_argument(
          "GradientClipping.clipping_type 'adaptive' does not work with parallelism_config.fsdp (as in Composer); "
          "use 'norm' or 'value'");
    }
    const double norm_type = type == functional::ClippingType::NORM ? 2.0 : std::numeric_limits<double>::infinity();
    state.strategy->clip_gradient_norm(*options_.clipping_threshold(), norm_type);
    return std::nullopt;
  }
  functional::apply_gradient_clipping(state.model->parameters(), *options_.clipping_type(),
                                      *options_.clipping_threshold());
  return std::nullopt;
}

std::string GradientClipping::repr() const { return options_repr("GradientClipping", options_); }

}  // namespace algorithms
}  // namespace composer
