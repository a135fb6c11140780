#include "composer/algorithms/ema.h"

#include "algorithms/detail/common.h"
#include "algorithms/detail/held_weights.h"
#include "composer/core/callback.h"
#include "composer/core/fields.h"
#include "composer/core/serialization.h"
#include "composer/core/state.h"
#include "composer/dist/strategy.h"
#include "composer/models/composer_model.h"

#include <ATen/ATen.h>
#include <c10/util/irange.h>

#include <cmath>
#include <stdexcept>

namespace composer {
namespace {

void require_same_shape(const std::string& name, const at::Tensor& model, const at::Tensor& ema) {
  if (model.sizes() != ema.sizes()) {
    throw std::invalid_argument("EMA: the averaged '" + name + "' has shape " + c10::str(ema.sizes()) +
                                ", the model's has " + c10::str(model.sizes()) + " (a checkpoint of another model?)");
  }
}

void swap_into(const std::string& name, const at::Tensor& model, at::Tensor& ema) {
  require_same_shape(name, model, ema);
  const at::Tensor held = model.clone();
  model.copy_(ema);
  ema.copy_(held);
}

bool is_training_unit(TimeUnit unit) { return unit == TimeUnit::BATCH || unit == TimeUnit::EPOCH; }

// ema = ema * smoothing + weight * (1 - smoothing), written as Composer writes it so integer buffers round alike.
void average_into(at::Tensor& ema, const at::Tensor& weight, double smoothing) {
  ema.copy_(ema * smoothing + weight.detach() * (1.0 - smoothing));
}

}  // namespace

namespace algorithms {

namespace {

// fn(name, the held tensor, the averaged copy) for each held parameter and buffer that `ema` has.
template <class Ema, class Fn>
void for_each_copy(const detail::HeldWeights& held, Ema& ema, Fn&& fn) {
  for (const auto& [name, t] : held.parameters) {
    auto it = ema.named_parameters_dict.find(name);
    if (it != ema.named_parameters_dict.end()) fn(name, t, it->second);
  }
  for (const auto& [name, t] : held.buffers) {
    auto it = ema.named_buffers_dict.find(name);
    if (it != ema.named_buffers_dict.end()) fn(name, t, it->second);
  }
}

EMAParameters copies_of(const detail::HeldWeights& held) {
  EMAParameters p;
  at::NoGradGuard no_grad;
  for (const auto& [name, t] : held.parameters) p.named_parameters_dict[name] = t.detach().clone();
  for (const auto& [name, t] : held.buffers) p.named_buffers_dict[name] = t.detach().clone();
  return p;
}

void swap_held(const detail::HeldWeights& held, EMAParameters& ema) {
  at::NoGradGuard no_grad;
  for_each_copy(held, ema, [](const std::string& name, const at::Tensor& weight, at::Tensor& copy) {
    swap_into(name, weight, copy);
  });
}

void move_to_held_devices(const detail::HeldWeights& held, EMAParameters& ema) {
  for_each_copy(held, ema, [](const std::string&, const at::Tensor& weight, at::Tensor& copy) {
    copy = copy.to(weight.device());
  });
}

// compute_ema over held weights.
void average_held(const detail::HeldWeights& held, EMAParameters& ema, double smoothing) {
  at::NoGradGuard no_grad;
  for_each_copy(held, ema, [&](const std::string& name, const at::Tensor& weight, at::Tensor& copy) {
    require_same_shape(name, weight, copy);
    average_into(copy, weight, smoothing);
  });
}

}  // namespace

EMAParameters EMAParameters::of(const torch::nn::Module& model) {
  return copies_of(detail::weights_of(model, /*frozen_too=*/false));
}

void EMAParameters::swap_params(torch::nn::Module& model) {
  swap_held(detail::weights_of(model, /*frozen_too=*/true), *this);
}

void EMAParameters::transfer_ema_params(torch::nn::Module& model) const {
  at::NoGradGuard no_grad;
  for_each_copy(detail::weights_of(model, /*frozen_too=*/true), *this,
                [](const std::string& name, const at::Tensor& weight, const at::Tensor& ema) {
                  require_same_shape(name, weight, ema);
                  weight.copy_(ema);
                });
}

void EMAParameters::move_params_to_device(const torch::nn::Module& model) {
  move_to_held_devices(detail::weights_of(model, /*frozen_too=*/true), *this);
}

}  // namespace algorithms

namespace functional {

void compute_ema(const torch::nn::Module& model, torch::nn::Module& ema_model, double smoothing) {
  algorithms::detail::require_range("compute_ema", "smoothing", smoothing, 0.0, 1.0);
  at::NoGradGuard no_grad;
  std::map<std::string, at::Tensor> ema;  // Composer's ema_model.state_dict(): every parameter and buffer
  for (const auto& item : ema_model.named_parameters()) ema[item.key()] = item.value();
  for (const auto& item : ema_model.named_buffers()) ema[item.key()] = item.value();
  auto visit = [&](const std::string& name, const at::Tensor& weight) {
    auto it = ema.find(name);
    if (it == ema.end()) return;
    require_same_shape(name, weight, it->second);
    average_into(it->second, weight, smoothing);
  };
  for (const auto& item : model.named_parameters()) visit(item.key(), item.value());
  for (const auto& item : model.named_buffers()) visit(item.key(), item.value());
}

void compute_ema(const torch::nn::Module& model, algorithms::EMAParameters& ema_model, double smoothing) {
  algorithms::detail::require_range("compute_ema", "smoothing", smoothing, 0.0, 1.0);
  algorithms::average_held(algorithms::detail::weights_of(model, /*frozen_too=*/true), ema_model, smoothing);
}

}  // namespace functional

namespace algorithms {

void EMAOptions::validate() const {
  if (!half_life_ && !smoothing_) throw std::invalid_argument("EMA: either half_life or smoothing must be set");
  if (half_life_ && smoothing_) {
    throw std::invalid_argument("EMA: only one of half_life or smoothing may be set (set half_life to None)");
  }
  if (half_life_ && (!is_training_unit(half_life_->unit()) || half_life_->value() <= 0)) {
    throw std::invalid_argument("EMA.half_life must be a positive number of batches or epochs ('1000ba'), got '" +
                                half_life_->to_string() + "'");
  }
  if (smoothing_) detail::require_range("EMA", "smoothing", *smoothing_, 0.0, 1.0);
  if (update_interval_ && (!is_training_unit(update_interval_->unit()) || update_interval_->value() <= 0)) {
    throw std::invalid_argument("EMA.update_interval must be a positive number of batches or epochs ('1ba'), got '" +
                                update_interval_->to_string() + "'");
  }
  if (half_life_ && interval().unit() != half_life_->unit()) {
    throw std::invalid_argument("EMA: the units of half_life ('" + half_life_->to_string() +
                                "') and update_interval ('" + interval().to_string() + "') must match");
  }
  const TimeUnit start = ema_start_.unit();
  if (start != TimeUnit::DURATION && !is_training_unit(start)) {
    throw std::invalid_argument("EMA.ema_start must be in 'dur', 'ba' or 'ep', got '" + ema_start_.to_string() + "'");
  }
}

Time EMAOptions::interval() const {
  if (update_interval_) return *update_interval_;
  return Time(1, half_life_ ? half_life_->unit() : TimeUnit::BATCH);
}

double EMAOptions::effective_smoothing() const {
  if (smoothing_) return *smoothing_;
  return std::pow(2.0, -(interval().value() / half_life_->value()));
}

EMA::EMA(EMAOptions options)
    : options_(std::move(options)), interval_(Time::from_batch(1)), smoothing_(0), update_event_(Event::BATCH_END) {
  options_.validate();
  interval_ = options_.interval();
  smoothing_ = options_.effective_smoothing();
  update_event_ = interval_.unit() == TimeUnit::BATCH ? Event::BATCH_END : Event::EPOCH_END;
}

bool EMA::should_start(const State& state) const {
  const Time& start = options_.ema_start();
  if (start.unit() == TimeUnit::DURATION) {
    const auto elapsed = state.get_elapsed_duration();
    return elapsed && start.value() <= *elapsed;
  }
  return start.value() <= state.timestamp.get(start.unit()).value();
}

void EMA::hold_as_parts(const State& state) {
  if (sharded_by_ || !ema_model_ || !state.strategy || !state.strategy->sharded_state()) return;
  const detail::HeldWeights held = detail::held_weights(state);
  ema_model_->named_parameters_dict =
      detail::parts_of(held, ema_model_->named_parameters_dict, "EMA's averaged weights");
  sharded_by_ = state.strategy;
}

bool EMA::match(Event event, const State& state) {
  if (event == Event::INIT) return true;
  hold_as_parts(state);
  if (event == update_event_ && !ema_started_ && should_start(state)) {
    // The average starts from the weights at ema_start.
    const detail::HeldWeights held = detail::held_weights(state);
    ema_model_ = copies_of(held);
    sharded_by_ = held.sharded ? state.strategy : nullptr;
    ema_started_ = true;
  }
  if (!ema_started_) return false;
  if (event == Event::BATCH_CHECKPOINT || event == Event::EPOCH_CHECKPOINT) {
    for (const auto& callback : state.callbacks)
      if (callback->will_save_checkpoint(state, event)) return true;
    return false;
  }
  if (event == Event::BATCH_START || event == Event::EVAL_START || event == Event::EVAL_END ||
      event == Event::FIT_START || event == Event::PREDICT_START) {
    return true;
  }
  if (event == update_event_) {
    const auto now = static_cast<int64_t>(state.timestamp.get(interval_.unit()).value());
    return now % interval_.int_value() == 0;
  }
  return false;
}

void EMA::ensure_training_weights_active(State& state) {
  if (ema_weights_active_ && ema_model_) {
    swap_held(detail::held_weights(state), *ema_model_);
    ema_weights_active_ = false;
  }
}

void EMA::ensure_ema_weights_active(State& state) {
  if (!ema_weights_active_ && ema_model_) {
    swap_held(detail::held_weights(state), *ema_model_);
    ema_weights_active_ = true;
  }
}

std::optional<int> EMA::apply(Event event, State& state, Logger&) {
  if (!state.model) return std::nullopt;
  if (event == Event::INIT) {
    const detail::HeldWeights held = detail::held_weights(state);
    ema_model_ = copies_of(held);
    sharded_by_ = held.sharded ? state.strategy : nullptr;
  }
  if (!ema_model_) return std::nullopt;
  hold_as_parts(state);
  switch (event) {
    case Event::FIT_START:
    case Event::PREDICT_START:
    case Event::EVAL_START:
      move_to_held_devices(detail::held_weights(state), *ema_model_);
      if (event == Event::EVAL_START) ensure_ema_weights_active(state);
      break;
    case Event::BATCH_START:
    case Event::EVAL_END:
      ensure_training_weights_active(state);
      break;
    case Event::BATCH_END:
    case Event::EPOCH_END:
      average_held(detail::held_weights(state), *ema_model_, smoothing_);
      break;
    case Event::BATCH_CHECKPOINT:
    case Event::EPOCH_CHECKPOINT:
      ensure_ema_weights_active(state);
      break;
    default:
      break;
  }
  return std::nullopt;
}

std::string EMA::repr() const { return options_repr("EMA", options_); }

c10::IValue EMA::state_dict() const {
  Dict d = Algorithm::state_dict().toGenericDict();
  if (ema_model_) {
    Dict ema = new_dict();
    // Under a sharded strategy the parts are gathered whole (every rank makes its checkpoint state together).
    std::map<std::string, at::Tensor> whole;
    if (sharded_by_) whole = detail::wholes_of_copies(*sharded_by_->sharded_state(), ema_model_->named_parameters_dict);
    ema.insert("named_parameters_dict", detail::tensor_dict(sharded_by_ ? whole : ema_model_->named_parameters_dict));
    ema.insert("named_buffers_dict", detail::tensor_dict(ema_model_->named_buffers_dict));
    d.insert("ema_model", ema);
  }
  d.insert("ema_weights_active", ema_weights_active_);
  d.insert("ema_started", ema_started_);
  return d;
}

void EMA::load_state_dict(const c10::IValue& state) {
  Algorithm::load_state_dict(state);
  const Dict d = state.toGenericDict();
  if (d.contains("training_model")) {
    throw std::invalid_argument(
        "EMA checkpoint state: the 'training_model' layout of Composer before 0.13 is not supported");
  }
  std::optional<EMAParameters> loaded;
  if (d.contains("ema_model")) {
    const c10::IValue ema = d.at("ema_model");
    if (!ema.isGenericDict()) throw std::invalid_argument("EMA checkpoint state: ema_model must be a dict");
    const Dict e = ema.toGenericDict();
    loaded = EMAParameters{detail::tensor_map(dict_get(e, "named_parameters_dict", "EMA ema_model"),
                                              "EMA checkpoint state: ema_model.named_parameters_dict"),
                           detail::tensor_map(dict_get(e, "named_buffers_dict", "EMA ema_model"),
                                              "EMA checkpoint state: ema_model.named_buffers_dict")};
  }
  const bool active = detail::flag(d, "ema_weights_active", "EMA checkpoint state");
  const bool started = detail::flag(d, "ema_started", "EMA checkpoint state");
  // Checked before anything changes: a bad state leaves this algorithm as it was.
  if (loaded) {
    ema_model_ = std::move(loaded);
    sharded_by_ = nullptr;  // whole: cut to this rank's parts at the next event
  }
  ema_weights_active_ = active;
  ema_started_ = started;
}

torch::nn::Module& EMA::get_ema_model(torch::nn::Module& model) const {
  if (!ema_model_) throw std::logic_error("EMA.get_ema_model: no averaged weights before INIT");
  if (ema_weights_active_) throw std::logic_error("EMA.get_ema_model: the averaged weights are already in the model");
  if (sharded_by_) {
    throw std::logic_error(
        "EMA.get_ema_model: each rank holds only its part of the averaged weights (a sharded strategy); read them "
        "from a checkpoint, which holds them whole");
  }
  ema_model_->transfer_ema_params(model);
  return model;
}

torch::nn::Module& EMA::get_training_model(torch::nn::Module& model) const {
  if (!ema_model_) throw std::logic_error("EMA.get_training_model: no weights before INIT");
  if (!ema_weights_active_) {
    throw std::logic_error("EMA.get_training_model: the training weights are already in the model");
  }
  if (sharded_by_) {
    throw std::logic_error(
        "EMA.get_training_model: each rank holds only its part of the training weights (a sharded strategy)");
  }
  ema_model_->transfer_ema_params(model);
  return model;
}

}  // namespace algorithms
}  // namespace composer
