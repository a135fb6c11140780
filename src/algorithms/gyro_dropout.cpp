#include "composer/algorithms/gyro_dropout.h"

#include "algorithms/detail/common.h"
#include "composer/core/fields.h"
#include "composer/core/state.h"
#include "composer/models/composer_model.h"
#include "composer/nn/layers.h"

#include <ATen/ATen.h>

#include <iostream>
#include <stdexcept>

namespace composer {
namespace nn {

GyroDropoutLayer::GyroDropoutLayer(int64_t total, double prob, int64_t s, int64_t t)
    : total_steps(total), sigma(s), tau(t), p(prob) {
  algorithms::detail::require_range("GyroDropoutLayer", "p", prob, 0.0, 1.0, false, /*hi_open=*/true);
  if (s < 1 || t < 1 || t > s) {
    throw std::invalid_argument("GyroDropoutLayer: need 1 <= tau <= sigma, got sigma " + std::to_string(s) +
                                " and tau " + std::to_string(t));
  }
  if (total < 1) throw std::invalid_argument("GyroDropoutLayer: total_steps must be >= 1");
}

at::Tensor GyroDropoutLayer::forward(const at::Tensor& x) {
  if (!is_training()) return x;
  if (x.dim() != 2) {
    throw std::invalid_argument("GyroDropoutLayer: expects [N, features] inputs, got shape " + c10::str(x.sizes()));
  }
  if (x.size(0) % tau != 0) {
    throw std::invalid_argument("GyroDropoutLayer: the batch (" + std::to_string(x.size(0)) +
                                ") must be a multiple of tau (" + std::to_string(tau) + ")");
  }
  if (training_step == 0) {
    preselect_masks = (at::rand({sigma, x.size(1)}) > p).to(x.options());
    iter_num = std::max<int64_t>(1, (total_steps / sigma) * tau);  // Composer: int(total / sigma) * tau
  }
  if (training_step % iter_num == 0) {
    const at::Tensor pick = at::randint(sigma, {tau}, at::TensorOptions().dtype(at::kLong));
    selected_masks = preselect_masks.index_select(0, pick.to(preselect_masks.device()));
  }
  const at::Tensor mask = selected_masks.repeat_interleave(x.size(0) / tau, 0).to(x.dtype());
  ++training_step;
  return x * mask * (1.0 / (1.0 - p));
}

}  // namespace nn

namespace functional {

std::vector<Replacement> apply_gyro_dropout(torch::nn::Module& model, int64_t total_steps, double p, int64_t sigma,
                                            int64_t tau) {
  nn::GyroDropoutLayer check(total_steps, p, sigma, tau);  // the arguments' errors before any surgery
  std::vector<ReplacementPolicy> policies{
      policy_for<nn::Dropout>([&](nn::Dropout&, int64_t) -> std::shared_ptr<nn::Layer> {
        return std::make_shared<nn::GyroDropoutLayer>(total_steps, p, sigma, tau);
      })};
  auto done = replace_module_classes(model, policies);
  if (done.empty()) std::cerr << "composer: GyroDropout found no Dropout to replace\n";
  return done;
}

}  // namespace functional

namespace algorithms {

void GyroDropoutOptions::validate() const {
  detail::require_range("GyroDropout", "p", p_, 0.0, 1.0, false, /*hi_open=*/true);
  if (sigma_ < 1) detail::bad_option("GyroDropout", "sigma", ">= 1", static_cast<double>(sigma_));
  if (tau_ < 1 || tau_ > sigma_) detail::bad_option("GyroDropout", "tau", "in [1, sigma]", static_cast<double>(tau_));
}

GyroDropout::GyroDropout(GyroDropoutOptions options) : options_(options) { options_.validate(); }

bool GyroDropout::match(Event event, const State&) { return event == Event::FIT_START; }

std::optional<int> GyroDropout::apply(Event, State& state, Logger&) {
  if (!state.model) return std::nullopt;
  if (!state.max_duration || !state.dataloader_len) {
    throw std::invalid_argument("GyroDropout: needs max_duration and a training dataloader with a length");
  }
  const Time& d = *state.max_duration;
  int64_t total = 0;
  if (d.unit() == TimeUnit::EPOCH) {
    total = *state.dataloader_len * d.int_value();
  } else if (d.unit() == TimeUnit::BATCH) {
    total = d.int_value();
  } else {
    throw std::invalid_argument("GyroDropout: max_duration must be in 'ep' or 'ba', got " + d.to_string());
  }
  functional::apply_gyro_dropout(*state.model, std::max<int64_t>(1, total), options_.p(), options_.sigma(),
                                 options_.tau());
  return std::nullopt;
}

std::string GyroDropout::repr() const { return options_repr("GyroDropout", options_); }

}  // namespace algorithms
}  // namespace composer
