#include "composer/algorithms/sam.h"

#include "algorithms/detail/common.h"
#include "composer/core/fields.h"
#include "composer/core/serialization.h"
#include "composer/core/state.h"
#include "composer/dist/strategy.h"
#include "composer/models/composer_model.h"
#include "composer/optim/closure.h"

#include <ATen/ATen.h>

#include <cmath>
#include <stdexcept>

namespace composer::algorithms {
namespace {

std::vector<torch::optim::OptimizerParamGroup> groups_of(const torch::optim::Optimizer& base) {
  return base.param_groups();  // copies: the same parameters, cloned options
}

}  // namespace

SAMOptimizer::SAMOptimizer(std::shared_ptr<torch::optim::Optimizer> base, double rho, double epsilon, int64_t interval)
    : optim::Optimizer(groups_of(*base), base->defaults().clone()),
      base_(std::move(base)),
      rho_(rho),
      epsilon_(epsilon),
      interval_(interval) {
  if (rho < 0) throw std::invalid_argument("SAMOptimizer: rho must be >= 0, got " + std::to_string(rho));
  if (interval < 1) throw std::invalid_argument("SAMOptimizer: interval must be >= 1, got " + std::to_string(interval));
}

void SAMOptimizer::pass_groups_to_base() {
  auto& mine = param_groups();
  auto& theirs = base_->param_groups();
  if (mine.size() != theirs.size()) throw std::logic_error("SAMOptimizer: its groups and the base's diverged");
  for (size_t i = 0; i < mine.size(); ++i) {
    theirs[i].params() = mine[i].params();
    theirs[i].set_options(mine[i].options().clone());
  }
}

void SAMOptimizer::first_step() {
  at::NoGradGuard no_grad;
  e_w_.clear();
  at::Tensor grad_norm;
  if (sharded_norm_) {  // every rank joins the norm's collective, whether or not it holds a gradient
    grad_norm = at::scalar_tensor(sharded_norm_(), at::kDouble);
  } else {
    std::vector<at::Tensor> norms;
    for (const auto& group : param_groups())
      for (const auto& p : group.params())
        if (p.grad().defined()) norms.push_back(p.grad().norm(2));
    if (norms.empty()) return;
    grad_norm = at::stack(norms).norm(2);
  }
  const at::Tensor scale = rho_ / (grad_norm + epsilon_);
  for (const auto& group : param_groups()) {
    for (const auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      at::Tensor e_w = p.grad() * scale.to(p.options());
      p.add_(e_w);
      e_w_.emplace_back(p, std::move(e_w));
    }
  }
}

void SAMOptimizer::sub_e_w() {
  at::NoGradGuard no_grad;
  for (auto& [p, e_w] : e_w_) p.sub_(e_w);
  e_w_.clear();
}

void SAMOptimizer::second_step() {
  {
    at::NoGradGuard no_grad;
    for (auto& [p, e_w] : e_w_)
      if (p.grad().defined()) p.sub_(e_w);
    e_w_.clear();
  }
  pass_groups_to_base();
  base_->step();
}

at::Tensor SAMOptimizer::step(LossClosure closure) {
  if (!closure) throw std::invalid_argument("SAMOptimizer.step: sharpness-aware minimization needs a closure");
  auto nonzero = [](const at::Tensor& loss) { return loss.defined() && loss.item<double>() != 0.0; };
  at::Tensor loss;
  if ((global_step_ + 1) % interval_ == 0) {
    if (sharded_norm_) {
      loss = closure();
    } else {
      optim::NoSyncClosure local_gradients;
      loss = closure();
    }
    if (nonzero(loss)) {
      first_step();
      if (nonzero(closure())) {
        second_step();
      } else {
        sub_e_w();
      }
    }
  } else {
    loss = closure();
    if (nonzero(loss)) {
      pass_groups_to_base();
      base_->step();
    }
  }
  ++global_step_;
  return loss;
}

c10::IValue SAMOptimizer::state_dict() const { return optim::optimizer_state_dict(*base_); }

void SAMOptimizer::load_state_dict(const c10::IValue& state) { optim::load_optimizer_state_dict(*base_, state); }

void SAMOptimizer::erase_state(const at::Tensor& param) { optim::erase_param_state(*base_, param); }

std::vector<double> SAMOptimizer::initial_lrs() const { return optim::initial_lrs(*base_); }

void SAMOptions::validate() const {
  if (rho_ < 0) detail::bad_option("SAM", "rho", ">= 0", rho_);
  if (epsilon_ <= 0) detail::bad_option("SAM", "epsilon", "> 0", epsilon_);
  if (interval_ < 1) detail::bad_option("SAM", "interval", ">= 1", static_cast<double>(interval_));
}

SAM::SAM(SAMOptions options) : options_(options) { options_.validate(); }

bool SAM::match(Event event, const State&) { return event == Event::AFTER_LOAD; }

std::optional<int> SAM::apply(Event, State& state, Logger&) {
  if (!state.optimizer) throw std::invalid_argument("SAM: the run has no optimizer to wrap");
  if (state.precision == Precision::AMP_FP16) {
    throw std::invalid_argument(
        "SAM: precision 'amp_fp16' is not supported (its grad scaler does not step through the closure here); use "
        "'amp_bf16' or 'fp32'");
  }
  if (auto existing = std::dynamic_pointer_cast<SAMOptimizer>(state.optimizer)) {
    optimizer_ = existing;
    return std::nullopt;
  }
  auto sam = std::make_shared<SAMOptimizer>(state.optimizer, options_.rho(), options_.epsilon(), options_.interval());
  sam->set_global_step(loaded_global_step_);
  if (state.strategy->holds_gradients()) {  // FSDP: the norm over every rank's part of the gradients
    std::weak_ptr<dist::Strategy> strategy = state.strategy;
    std::weak_ptr<ComposerModel> model = state.model;
    sam->set_sharded_gradient_norm([strategy, model] {
      const auto s = strategy.lock();
      const auto m = model.lock();
      if (!s || !m) throw std::logic_error("SAM: the run's strategy or model is gone");
      const auto sums = s->parameter_sums(*m, 1, [](const at::Tensor& stepped, int64_t begin, int64_t end) {
        return std::vector<double>{stepped.grad().defined() ? dist::squared_norm(stepped.grad(), begin, end) : 0.0};
      });
      double total = 0;
      for (const auto& [name, sum] : sums) total += sum[0];
      return std::sqrt(total);
    });
  }
  state.optimizer = sam;
  optimizer_ = sam;
  return std::nullopt;
}

std::string SAM::repr() const { return options_repr("SAM", options_); }

c10::IValue SAM::state_dict() const {
  Dict d = Algorithm::state_dict().toGenericDict();
  const auto sam = optimizer_.lock();
  d.insert("global_step", sam ? sam->global_step() : loaded_global_step_);
  return d;
}

void SAM::load_state_dict(const c10::IValue& state) {
  Algorithm::load_state_dict(state);
  const int64_t step = detail::integer(state.toGenericDict(), "global_step", "SAM checkpoint state");
  if (step < 0) throw std::invalid_argument("SAM checkpoint state: global_step must be >= 0");
  loaded_global_step_ = step;
  if (auto sam = optimizer_.lock()) sam->set_global_step(step);
}

}  // namespace composer::algorithms
