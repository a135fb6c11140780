#include "composer/optim/decoupled_adamw.h"

#include "composer/utils/compat.h"
#include "optim/detail/optimizer_state.h"

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <cmath>
#include <iostream>
#include <stdexcept>

namespace composer::optim {

void DecoupledAdamWOptions::validate() const {
  if (lr_ < 0) throw std::invalid_argument("DecoupledAdamW.lr must be >= 0, got " + std::to_string(lr_));
  if (eps_ < 0) throw std::invalid_argument("DecoupledAdamW.eps must be >= 0, got " + std::to_string(eps_));
  const auto [beta1, beta2] = betas_;
  if (beta1 < 0 || beta1 >= 1)
    throw std::invalid_argument("DecoupledAdamW.betas[0] must be in [0, 1), got " + std::to_string(beta1));
  if (beta2 < 0 || beta2 >= 1)
    throw std::invalid_argument("DecoupledAdamW.betas[1] must be in [0, 1), got " + std::to_string(beta2));
  if (weight_decay_ < 0)
    throw std::invalid_argument("DecoupledAdamW.weight_decay must be >= 0, got " + std::to_string(weight_decay_));
}

DecoupledAdamW::DecoupledAdamW(std::vector<at::Tensor> params, DecoupledAdamWOptions options)
    : DecoupledAdamW(
          std::vector<torch::optim::OptimizerParamGroup>{torch::optim::OptimizerParamGroup(std::move(params))},
          options) {}

DecoupledAdamW::DecoupledAdamW(std::vector<torch::optim::OptimizerParamGroup> groups, DecoupledAdamWOptions options)
    : Optimizer(std::move(groups), std::make_unique<DecoupledAdamWOptions>(options)) {
  init_groups();
}

std::vector<std::string> DecoupledAdamW::per_parameter_norm_keys() const {
  return {"l2_norm/moment", "l2_norm/param", "l2_norm/update", "l2_norm/grad"};
}

std::optional<std::vector<double>> DecoupledAdamW::per_parameter_squares(const at::Tensor& param, int64_t begin,
                                                                         int64_t end) const {
  auto it = state_by_param_.find(param.unsafeGetTensorImpl());
  if (it == state_by_param_.end() || param_groups_.empty() || !it->second.exp_avg.defined() || !param.grad().defined())
    return std::nullopt;
  const ParamState& st = it->second;
  const auto& o = static_cast<const DecoupledAdamWOptions&>(param_groups_[0].options());
  const auto [beta1, beta2] = o.betas();
  const double t = static_cast<double>(step_count(st));
  const double bias_correction1 = 1 - std::pow(beta1, t), bias_correction2 = 1 - std::pow(beta2, t);
  at::NoGradGuard no_grad;
  const auto part = [&](const at::Tensor& whole) { return whole.reshape(-1).narrow(0, begin, end - begin); };
  const at::Tensor p = part(param), m = part(st.exp_avg), v = part(st.exp_avg_sq), g = part(param.grad());
  const at::Tensor denom = (v.sqrt() / std::sqrt(bias_correction2)).add_(o.eps());
  at::Tensor update = (o.lr() / bias_correction1) * m.div(denom);
  const double decay_factor = o.initial_lr() != 0 ? o.lr() / o.initial_lr() : 1.0;
  update.add_(p, -o.weight_decay() * decay_factor);
  const auto squares = [](const at::Tensor& x) {
    const double n = at::linalg_vector_norm(x).item<double>();
    return n * n;
  };
  return std::vector<double>{squares(m), squares(p), squares(update), squares(g)};
}

std::vector<double> DecoupledAdamW::initial_lrs() const {
  return detail::initial_lrs_of<DecoupledAdamWOptions>(param_groups_);
}

void DecoupledAdamW::init_groups() {
  detail::init_decoupled_groups<DecoupledAdamWOptions>(param_groups_, "DecoupledAdamW");
}

namespace {

// The fused kernel takes one device and one dtype per call.
bool one_device_and_dtype(const std::vector<at::Tensor>& params) {
  for (const auto& p : params)
    if (p.device() != params.front().device() || p.scalar_type() != params.front().scalar_type()) return false;
  return true;
}

}  // namespace

int64_t DecoupledAdamW::step_count(const ParamState& state) {
  return state.step_tensor.defined() ? static_cast<int64_t>(std::llround(state.step_tensor.item<double>()))
                                     : state.step;
}

void DecoupledAdamW::set_graph_capture(bool on) {
  graph_lrs_.clear();
  graph_capture_ = false;
  if (!on) return;
  for (size_t i = 0; i < param_groups_.size(); ++i) {
    const auto& params = param_groups_[i].params();
    if (!one_device_and_dtype(params)) {
      throw std::invalid_argument("DecoupledAdamW: param group " + std::to_string(i) +
                                  " mixes devices or dtypes, which the fused kernel a CUDA graph records cannot "
                                  "step; put each device and dtype in a group of its own");
    }
    graph_lrs_.push_back(params.empty() ? at::Tensor() : at::zeros({}, params.front().options().dtype(at::kFloat)));
  }
  graph_capture_ = true;
  refresh_graph_scalars();
}

void DecoupledAdamW::refresh_graph_scalars() {
  if (!graph_capture_) return;
  for (size_t i = 0; i < param_groups_.size(); ++i)
    if (graph_lrs_[i].defined()) graph_lrs_[i].fill_(param_groups_[i].options().get_lr());
}

// One _fused_adamw_ call over `params` (one device, one dtype); `lr` a device tensor under graph capture, else
// undefined (the group's lr as a host scalar). The step counts live on the device from here on.
void DecoupledAdamW::step_fused(const torch::optim::OptimizerParamGroup& group, const std::vector<at::Tensor>& params,
                                const at::Tensor& lr) {
  const auto& o = static_cast<const DecoupledAdamWOptions&>(group.options());
  std::vector<at::Tensor> grads, m, v, vmax, steps;
  for (const auto& p : params) {
    auto& s = state_by_param_.at(p.unsafeGetTensorImpl());
    if (!s.step_tensor.defined())
      s.step_tensor = at::full({}, static_cast<double>(s.step), p.options().dtype(at::kFloat));
    grads.push_back(p.grad());
    m.push_back(s.exp_avg);
    v.push_back(s.exp_avg_sq);
    if (o.amsgrad()) vmax.push_back(s.max_exp_avg_sq);
    steps.push_back(s.step_tensor);
  }
  at::_foreach_add_(steps, 1);  // the kernel reads step t; torch's optimizer counts it up first too
  // The kernel decays p *= 1 - lr*wd; Composer's decoupled decay is 1 - (lr/initial_lr)*wd, or 1 - wd for a group
  // created with lr 0, which the kernel cannot express: that decay is applied here first.
  double kernel_decay = 0.0;
  if (o.initial_lr() != 0) {
    kernel_decay = o.weight_decay() / o.initial_lr();
  } else if (o.weight_decay() != 0) {
    at::_foreach_mul_(params, 1.0 - o.weight_decay());
  }
  const double beta1 = std::get<0>(o.betas()), beta2 = std::get<1>(o.betas());
  if (lr.defined()) {
    at::_fused_adamw_(params, grads, m, v, vmax, steps, lr, beta1, beta2, kernel_decay, o.eps(), o.amsgrad(),
                      /*maximize=*/false);
  } else {
    at::_fused_adamw_(params, grads, m, v, vmax, steps, o.lr(), beta1, beta2, kernel_decay, o.eps(), o.amsgrad(),
                      /*maximize=*/false);
  }
}

at::Tensor DecoupledAdamW::step(LossClosure closure) {
  at::NoGradGuard no_grad;
  at::Tensor loss;
  if (closure) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  for (size_t g = 0; g < param_groups_.size(); ++g) {
    auto& group = param_groups_[g];
    const auto& o = static_cast<const DecoupledAdamWOptions&>(group.options());
    std::vector<at::Tensor> params;
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      auto& s = state_by_param_[p.unsafeGetTensorImpl()];
      if (!s.exp_avg.defined()) {
        s.exp_avg = at::zeros_like(p, at::MemoryFormat::Preserve);
        s.exp_avg_sq = at::zeros_like(p, at::MemoryFormat::Preserve);
        if (o.amsgrad()) s.max_exp_avg_sq = at::zeros_like(p, at::MemoryFormat::Preserve);
      }
      params.push_back(p);
    }
    if (params.empty()) continue;
    if (graph_capture_) {
      step_fused(group, params, graph_lrs_[g]);
      continue;
    }
    if (params.front().is_cuda() && one_device_and_dtype(params)) {
      step_fused(group, params, at::Tensor());
      continue;
    }
    std::vector<at::Tensor> grads, m, v;
    std::vector<at::Scalar> step_sizes, bias2_sqrt;
    for (auto& p : params) {
      auto& s = state_by_param_[p.unsafeGetTensorImpl()];
      s.step = step_count(s) + 1;
      s.step_tensor = at::Tensor();
      grads.push_back(p.grad());
      m.push_back(s.exp_avg);
      v.push_back(s.exp_avg_sq);
      step_sizes.emplace_back(-o.lr() / (1.0 - std::pow(std::get<0>(o.betas()), static_cast<double>(s.step))));
      bias2_sqrt.emplace_back(std::sqrt(1.0 - std::pow(std::get<1>(o.betas()), static_cast<double>(s.step))));
    }
    if (o.weight_decay() != 0) at::_foreach_mul_(params, 1.0 - detail::decay_factor(o) * o.weight_decay());
    at::_foreach_mul_(m, std::get<0>(o.betas()));
    at::_foreach_add_(m, grads, 1.0 - std::get<0>(o.betas()));
    at::_foreach_mul_(v, std::get<1>(o.betas()));
    at::_foreach_addcmul_(v, grads, grads, 1.0 - std::get<1>(o.betas()));
    std::vector<at::Tensor> second = v;
    if (o.amsgrad()) {
      second.clear();
      for (auto& p : params) {
        auto& s = state_by_param_[p.unsafeGetTensorImpl()];
        at::maximum_out(s.max_exp_avg_sq, s.max_exp_avg_sq, s.exp_avg_sq);
        second.push_back(s.max_exp_avg_sq);
      }
    }
    std::vector<at::Tensor> denom = at::_foreach_sqrt(second);
    at::_foreach_div_(denom, bias2_sqrt);
    at::_foreach_add_(denom, o.eps());
    at::_foreach_addcdiv_(params, m, denom, step_sizes);
  }
  return loss;
}

c10::IValue DecoupledAdamW::state_dict() const {
  return detail::make_state_dict(
      param_groups_,
      [&](const at::Tensor& p) -> c10::optional<Dict> {
        auto it = state_by_param_.find(p.unsafeGetTensorImpl());
        if (it == state_by_param_.end() || !it->second.exp_avg.defined()) return c10::nullopt;
        Dict d = new_dict();
        // A 0-dim float tensor, as torch.optim.AdamW (and so Composer's DecoupledAdamW) keeps it.
        d.insert("step", at::scalar_tensor(static_cast<double>(step_count(it->second)), at::kFloat));
        d.insert("exp_avg", it->second.exp_avg);
        d.insert("exp_avg_sq", it->second.exp_avg_sq);
        if (it->second.max_exp_avg_sq.defined()) d.insert("max_exp_avg_sq", it->second.max_exp_avg_sq);
        return d;
      },
      detail::group_fields<DecoupledAdamWOptions>);
}

void DecoupledAdamW::load_state_dict(const c10::IValue& state) {
  state_by_param_.clear();
  detail::load_state_dict(
      "DecoupledAdamW", param_groups_, state,
      [&](const at::Tensor& p, const Dict& d) {
        const std::string what = "DecoupledAdamW state";
        auto& s = state_by_param_[p.unsafeGetTensorImpl()];
        const c10::IValue step = dict_get(d, "step", what);  // a tensor (PyTorch, this library) or an int (older files)
        s.step = step.isTensor() ? static_cast<int64_t>(step.toTensor().item<double>()) : step.toInt();
        s.exp_avg = dict_get(d, "exp_avg", what).toTensor().to(p.device()).clone();
        s.exp_avg_sq = dict_get(d, "exp_avg_sq", what).toTensor().to(p.device()).clone();
        if (d.contains("max_exp_avg_sq")) s.max_exp_avg_sq = d.at("max_exp_avg_sq").toTensor().to(p.device()).clone();
      },
      [](torch::optim::OptimizerOptions& opts, const Dict& d) {
        detail::load_group_fields<DecoupledAdamWOptions>(opts, d, "DecoupledAdamW");
      });
}

}  // namespace composer::optim
