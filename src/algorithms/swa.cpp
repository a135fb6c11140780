#include "composer/algorithms/swa.h"

#include "algorithms/detail/common.h"
#include "algorithms/detail/held_weights.h"
#include "composer/core/fields.h"
#include "composer/core/hparams.h"
#include "composer/core/serialization.h"
#include "composer/core/state.h"
#include "composer/dist/strategy.h"
#include "composer/models/composer_model.h"

#include <ATen/ATen.h>
#include <torch/optim/optimizer.h>

#include <cmath>
#include <iostream>
#include <stdexcept>

namespace composer {
namespace functional {
namespace {

const std::vector<std::pair<std::string, AnnealStrategy>> kStrategies{{"linear", AnnealStrategy::LINEAR},
                                                                      {"lin", AnnealStrategy::LINEAR},
                                                                      {"cos", AnnealStrategy::COS},
                                                                      {"cosine", AnnealStrategy::COS}};

}  // namespace

std::string field_text(AnnealStrategy value) { return choice_text(value, kStrategies); }
void read_field(Hparams& hparams, const std::string& key, AnnealStrategy& value) {
  read_choice(hparams, key, value, kStrategies);
}

AveragedWeights AveragedWeights::of(const torch::nn::Module& model) {
  AveragedWeights w;
  at::NoGradGuard no_grad;
  for (const auto& item : model.named_buffers()) w.buffers[item.key()] = item.value().detach().to(at::kCPU).clone();
  return w;
}

namespace {

using NamedTensors = algorithms::detail::NamedTensors;

// update_averaged_weights over named tensors (a model's, or this rank's parts of a sharded one).
void update_averaged(AveragedWeights& averaged, const NamedTensors& params, const NamedTensors& buffers) {
  at::NoGradGuard no_grad;
  if (averaged.n_averaged > 0) {  // every check before anything changes
    for (const auto& [name, value] : params) {
      auto it = averaged.parameters.find(name);
      if (it == averaged.parameters.end())
        throw std::invalid_argument("SWA: the average has no parameter '" + name + "'");
      if (it->second.sizes() != value.sizes()) {
        throw std::invalid_argument("SWA: the averaged '" + name + "' has shape " + c10::str(it->second.sizes()) +
                                    ", the model's has " + c10::str(value.sizes()));
      }
    }
  }
  const double n = static_cast<double>(averaged.n_averaged);
  for (const auto& [name, value] : params) {
    const at::Tensor current = value.detach().to(at::kCPU);
    if (averaged.n_averaged == 0) {
      averaged.parameters[name] = current.clone();
    } else {
      at::Tensor& avg = averaged.parameters.at(name);
      avg.add_((current - avg) / (n + 1.0));
    }
  }
  // As torch's AveragedModel (use_buffers=False): buffers are not averaged; they follow the model's at every update.
  for (const auto& [name, value] : buffers) {
    const at::Tensor current = value.detach().to(at::kCPU);
    auto it = averaged.buffers.find(name);
    if (it != averaged.buffers.end() && it->second.sizes() == current.sizes())
      it->second.copy_(current);
    else
      averaged.buffers[name] = current.clone();
  }
  ++averaged.n_averaged;
}

// load_averaged_weights into named tensors (writing a part writes the shard).
void load_averaged(const AveragedWeights& averaged, const NamedTensors& params, const NamedTensors& buffers) {
  at::NoGradGuard no_grad;
  auto check = [](const std::string& name, const std::map<std::string, at::Tensor>& from, const at::Tensor& to) {
    auto it = from.find(name);
    if (it == from.end()) throw std::invalid_argument("SWA: the average has no '" + name + "'");
    if (it->second.sizes() != to.sizes())
      throw std::invalid_argument("SWA: the averaged '" + name + "' differs in shape from the model's");
  };
  for (const auto& [name, value] : params) check(name, averaged.parameters, value);
  for (const auto& [name, value] : buffers) check(name, averaged.buffers, value);
  for (const auto& [name, value] : params) value.detach().copy_(averaged.parameters.at(name));
  for (const auto& [name, value] : buffers) value.detach().copy_(averaged.buffers.at(name));
}

}  // namespace

void update_averaged_weights(AveragedWeights& averaged, const torch::nn::Module& model) {
  const auto held = algorithms::detail::weights_of(model, /*frozen_too=*/true);
  update_averaged(averaged, held.parameters, held.buffers);
}

void load_averaged_weights(const AveragedWeights& averaged, torch::nn::Module& model) {
  const auto held = algorithms::detail::weights_of(model, /*frozen_too=*/true);
  load_averaged(averaged, held.parameters, held.buffers);
}

SWALR::SWALR(double swa_lr, int64_t anneal_epochs, AnnealStrategy strategy, int64_t step_count)
    : swa_lr_(swa_lr), anneal_epochs_(anneal_epochs), strategy_(strategy), step_count_(step_count) {
  if (anneal_epochs < 0)
    throw std::invalid_argument("SWALR: anneal_epochs must be >= 0, got " + std::to_string(anneal_epochs));
  if (step_count < 0) throw std::invalid_argument("SWALR: step_count must be >= 0, got " + std::to_string(step_count));
}

SWALR::SWALR(torch::optim::Optimizer& optimizer, double swa_lr, int64_t anneal_epochs, AnnealStrategy strategy)
    : SWALR(swa_lr, anneal_epochs, strategy, 0) {
  step(optimizer);  // torch's LRScheduler takes its first step on construction
}

double SWALR::anneal(double t) const {
  return strategy_ == AnnealStrategy::LINEAR ? t : (1.0 - std::cos(M_PI * t)) / 2.0;
}

void SWALR::step(torch::optim::Optimizer& optimizer) {
  ++step_count_;
  int64_t step = step_count_ - 1;
  if (anneal_epochs_ == 0) step = std::max<int64_t>(1, step);
  const double span = static_cast<double>(std::max<int64_t>(1, anneal_epochs_));
  const double prev_t = std::clamp(static_cast<double>(step - 1) / span, 0.0, 1.0);
  const double prev_alpha = anneal(prev_t);
  const double t = std::clamp(static_cast<double>(step) / span, 0.0, 1.0);
  const double alpha = anneal(t);
  for (auto& group : optimizer.param_groups()) {
    const double lr = group.options().get_lr();
    const double prev_lr = prev_alpha == 1.0 ? swa_lr_ : (lr - prev_alpha * swa_lr_) / (1.0 - prev_alpha);
    group.options().set_lr(swa_lr_ * alpha + prev_lr * (1.0 - alpha));
  }
}

}  // namespace functional

namespace algorithms {
namespace {

constexpr const char* kState = "SWA checkpoint state";

void require_duration_fraction(const char* field, const Time& t) {
  if (t.unit() == TimeUnit::DURATION && (t.value() < 0 || t.value() > 1))
    throw std::invalid_argument(std::string("SWA.") + field + " in 'dur' must be in [0, 1], got " + t.to_string());
}

}  // namespace

void SWAOptions::validate() const {
  if (swa_start_.unit() != swa_end_.unit()) {
    throw std::invalid_argument("SWA.swa_start and swa_end must have the same unit, got " + swa_start_.to_string() +
                                " and " + swa_end_.to_string());
  }
  if (swa_start_.unit() != TimeUnit::DURATION && swa_start_.unit() != TimeUnit::EPOCH)
    throw std::invalid_argument("SWA.swa_start must be in 'dur' or 'ep', got " + swa_start_.to_string());
  if (update_interval_.unit() != TimeUnit::BATCH && update_interval_.unit() != TimeUnit::EPOCH)
    throw std::invalid_argument("SWA.update_interval must be in 'ba' or 'ep', got " + update_interval_.to_string());
  if (update_interval_.value() < 1 || update_interval_.value() != std::floor(update_interval_.value()))
    throw std::invalid_argument("SWA.update_interval must be a whole number >= 1, got " + update_interval_.to_string());
  if (!(swa_start_ < swa_end_))
    throw std::invalid_argument("SWA.swa_end must be after swa_start, got " + swa_end_.to_string() +
                                " <= " + swa_start_.to_string());
  require_duration_fraction("swa_start", swa_start_);
  require_duration_fraction("swa_end", swa_end_);
  if (anneal_steps_ <= 0) detail::bad_option("SWA", "anneal_steps", "> 0", static_cast<double>(anneal_steps_));
}

SWA::SWA(SWAOptions options)
    : options_(options),
      update_event_(options.update_interval().unit() == TimeUnit::BATCH ? Event::BATCH_END : Event::EPOCH_END) {
  options_.validate();
  if (options_.swa_end().unit() == TimeUnit::DURATION && options_.swa_end().value() == 1.0) {
    std::cerr << "composer: SWA swa_end='1dur': the averaged weights replace the model's at the very end, so no "
                 "training updates their BatchNorm statistics\n";
  }
}

double SWA::time_in_start_unit(const State& state) const {
  if (options_.swa_start().unit() == TimeUnit::EPOCH) return static_cast<double>(state.timestamp.epoch);
  return state.get_elapsed_duration().value_or(0.0);
}

bool SWA::match(Event event, const State& state) {
  if (event == Event::INIT) return true;
  if (event != update_event_ || swa_completed_) return false;
  return time_in_start_unit(state) >= options_.swa_start().value();
}

void SWA::start(State& state) {
  if (options_.schedule_swa_lr()) {
    if (!state.optimizer) throw std::invalid_argument("SWA: schedule_swa_lr needs an optimizer");
    if (state.schedulers.size() > 1) {
      throw std::invalid_argument("SWA: schedule_swa_lr supports one scheduler, the run has " +
                                  std::to_string(state.schedulers.size()));
    }
    const auto& groups = state.optimizer->param_groups();
    if (groups.size() != 1) {
      throw std::invalid_argument("SWA: schedule_swa_lr supports one learning rate, the optimizer has " +
                                  std::to_string(groups.size()) + " parameter groups");
    }
    // Composer's _get_last_lr: the scheduler's last rate, 1.0 without a scheduler.
    const double swa_lr = state.schedulers.empty() ? 1.0 : groups[0].options().get_lr();
    swa_scheduler_.emplace(*state.optimizer, swa_lr, options_.anneal_steps(), options_.anneal_strategy());
  }
  swa_model_ = functional::AveragedWeights::of(*state.model);
  sharded_by_ = state.strategy && state.strategy->sharded_state() ? state.strategy : nullptr;
}

void SWA::hold_as_parts(const State& state) {
  if (sharded_by_ || !swa_model_ || !state.strategy || !state.strategy->sharded_state()) return;
  if (swa_model_->n_averaged > 0) {
    const detail::HeldWeights held = detail::held_weights(state, /*frozen_too=*/true);
    swa_model_->parameters = detail::parts_of(held, swa_model_->parameters, "SWA's averaged weights");
    for (auto& [name, t] : swa_model_->parameters) t = t.to(at::kCPU);
  }
  sharded_by_ = state.strategy;
}

std::optional<int> SWA::apply(Event event, State& state, Logger&) {
  if (!state.model) return std::nullopt;
  if (event == Event::INIT) return std::nullopt;  // Composer's INIT copy is replaced when averaging starts
  if (!swa_started_) {
    start(state);
    swa_started_ = true;
  }
  hold_as_parts(state);
  // The model's parameters and buffers, or under a sharded strategy this rank's parts of the sharded ones.
  const detail::HeldWeights held = detail::held_weights(state, /*frozen_too=*/true);
  if (step_counter_ % options_.update_interval().int_value() == 0) {
    functional::update_averaged(*swa_model_, held.parameters, held.buffers);
    if (swa_scheduler_) swa_scheduler_->step(*state.optimizer);
  }
  ++step_counter_;
  if (time_in_start_unit(state) >= options_.swa_end().value()) {
    swa_completed_ = true;
    functional::load_averaged(*swa_model_, held.parameters, held.buffers);
  }
  return std::nullopt;
}

std::string SWA::repr() const { return options_repr("SWA", options_); }

c10::IValue SWA::state_dict() const {
  Dict d = Algorithm::state_dict().toGenericDict();
  if (swa_model_) {
    Dict m = new_dict();                      // AveragedModel's state_dict: module.<name> and n_averaged
    std::map<std::string, at::Tensor> whole;  // under a sharded strategy, gathered from every rank's parts
    if (sharded_by_ && swa_model_->n_averaged > 0)
      whole = detail::wholes_of_copies(*sharded_by_->sharded_state(), swa_model_->parameters);
    for (const auto& [name, t] : whole.empty() ? swa_model_->parameters : whole) m.insert("module." + name, t);
    for (const auto& [name, t] : swa_model_->buffers) m.insert("module." + name, t);
    m.insert("n_averaged", at::scalar_tensor(swa_model_->n_averaged, at::kLong));
    Dict kinds = new_dict();  // which module.* entries are buffers (not averaged)
    for (const auto& [name, t] : swa_model_->buffers) kinds.insert(name, true);
    d.insert("swa_model", m);
    d.insert("swa_model_buffers", kinds);
  } else {
    d.insert("swa_model", c10::IValue());
  }
  d.insert("swa_completed", swa_completed_);
  d.insert("swa_started", swa_started_);
  if (swa_scheduler_) {
    Dict sch = new_dict();
    sch.insert("_step_count", swa_scheduler_->step_count());
    sch.insert("swa_lr", swa_scheduler_->swa_lr());
    d.insert("swa_scheduler", sch);
  } else {
    d.insert("swa_scheduler", c10::IValue());
  }
  d.insert("step_counter", step_counter_);
  return d;
}

void SWA::load_state_dict(const c10::IValue& state) {
  Algorithm::load_state_dict(state);
  const Dict d = state.toGenericDict();
  const bool completed = detail::flag(d, "swa_completed", kState);
  const bool started = detail::flag(d, "swa_started", kState);
  const int64_t counter = detail::integer(d, "step_counter", kState);
  if (counter < 0) throw std::invalid_argument(std::string(kState) + ": step_counter must be >= 0");
  std::optional<functional::AveragedWeights> model;
  if (d.contains("swa_model") && !d.at("swa_model").isNone()) {
    const c10::IValue raw = d.at("swa_model");
    if (!raw.isGenericDict()) throw std::invalid_argument(std::string(kState) + ": swa_model must be a dict");
    std::map<std::string, bool> buffer_names;
    if (d.contains("swa_model_buffers") && d.at("swa_model_buffers").isGenericDict())
      for (const auto& item : d.at("swa_model_buffers").toGenericDict()) buffer_names[item.key().toStringRef()] = true;
    functional::AveragedWeights w;
    for (const auto& item : raw.toGenericDict()) {
      const std::string key = item.key().isString() ? item.key().toStringRef() : "";
      if (!item.value().isTensor())
        throw std::invalid_argument(std::string(kState) + ": swa_model." + key + " must be a tensor");
      if (key == "n_averaged") {
        w.n_averaged = item.value().toTensor().item<int64_t>();
      } else if (key.rfind("module.", 0) == 0) {
        const std::string name = key.substr(7);
        (buffer_names.count(name) ? w.buffers : w.parameters)[name] = item.value().toTensor();
      } else {
        throw std::invalid_argument(std::string(kState) + ": unexpected swa_model entry '" + key + "'");
      }
    }
    model = std::move(w);
  }
  int64_t sched_steps = 0;
  double sched_lr = 0;
  const bool has_scheduler = d.contains("swa_scheduler") && d.at("swa_scheduler").isGenericDict();
  if (has_scheduler) {
    const Dict s = d.at("swa_scheduler").toGenericDict();
    sched_steps = detail::integer(s, "_step_count", kState);
    if (sched_steps < 0) throw std::invalid_argument(std::string(kState) + ": swa_scheduler._step_count must be >= 0");
    const c10::IValue lr = dict_get(s, "swa_lr", kState);
    if (!lr.isDouble()) throw std::invalid_argument(std::string(kState) + ": swa_scheduler.swa_lr must be a float");
    sched_lr = lr.toDouble();
  }
  if (started && !model) throw std::invalid_argument(std::string(kState) + ": started, but has no swa_model");
  // Checked before anything changes: a bad state leaves this algorithm as it was.
  swa_completed_ = completed;
  swa_started_ = started;
  step_counter_ = counter;
  swa_model_ = std::move(model);
  sharded_by_ = nullptr;  // whole: cut to this rank's parts at the next update
  swa_scheduler_.reset();
  if (has_scheduler) swa_scheduler_.emplace(sched_lr, options_.anneal_steps(), options_.anneal_strategy(), sched_steps);
}

}  // namespace algorithms
}  // namespace composer
