#include "composer/optim/decoupled_sgdw.h"

#include "optim/detail/optimizer_state.h"

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <iostream>
#include <stdexcept>

namespace composer::optim {

void DecoupledSGDWOptions::validate() const {
  if (lr_ < 0) throw std::invalid_argument("DecoupledSGDW.lr must be >= 0, got " + std::to_string(lr_));
  if (momentum_ < 0)
    throw std::invalid_argument("DecoupledSGDW.momentum must be >= 0, got " + std::to_string(momentum_));
  if (weight_decay_ < 0)
    throw std::invalid_argument("DecoupledSGDW.weight_decay must be >= 0, got " + std::to_string(weight_decay_));
  if (nesterov_ && (momentum_ <= 0 || dampening_ != 0)) {
    throw std::invalid_argument("DecoupledSGDW.nesterov requires momentum > 0 and dampening = 0");
  }
}

DecoupledSGDW::DecoupledSGDW(std::vector<at::Tensor> params, DecoupledSGDWOptions options)
    : DecoupledSGDW(
          std::vector<torch::optim::OptimizerParamGroup>{torch::optim::OptimizerParamGroup(std::move(params))},
          options) {}

DecoupledSGDW::DecoupledSGDW(std::vector<torch::optim::OptimizerParamGroup> groups, DecoupledSGDWOptions options)
    : Optimizer(std::move(groups), std::make_unique<DecoupledSGDWOptions>(options)) {
  init_groups();
}

std::vector<double> DecoupledSGDW::initial_lrs() const {
  return detail::initial_lrs_of<DecoupledSGDWOptions>(param_groups_);
}

void DecoupledSGDW::init_groups() {
  detail::init_decoupled_groups<DecoupledSGDWOptions>(param_groups_, "DecoupledSGDW");
}

void DecoupledSGDW::set_graph_capture(bool on) {
  graph_neg_lrs_.clear();
  graph_decays_.clear();
  graph_capture_ = false;
  if (!on) return;
  for (size_t i = 0; i < param_groups_.size(); ++i) {
    const auto& params = param_groups_[i].params();
    for (const auto& p : params) {
      if (p.device() != params.front().device()) {
        throw std::invalid_argument("DecoupledSGDW: param group " + std::to_string(i) +
                                    " spans devices, which one recorded CUDA graph cannot step; put each device's "
                                    "parameters in a group of its own");
      }
    }
    const auto options = at::TensorOptions(params.empty() ? c10::Device(c10::kCPU) : params.front().device());
    graph_neg_lrs_.push_back(at::zeros({}, options.dtype(at::kDouble)));
    graph_decays_.push_back(at::ones({}, options.dtype(at::kDouble)));
  }
  graph_capture_ = true;
  refresh_graph_scalars();
}

void DecoupledSGDW::refresh_graph_scalars() {
  if (!graph_capture_) return;
  for (size_t i = 0; i < param_groups_.size(); ++i) {
    const auto& o = static_cast<const DecoupledSGDWOptions&>(param_groups_[i].options());
    graph_neg_lrs_[i].fill_(-o.lr());
    graph_decays_[i].fill_(1.0 - detail::decay_factor(o) * o.weight_decay());
  }
}

at::Tensor DecoupledSGDW::step(LossClosure closure) {
  at::NoGradGuard no_grad;
  at::Tensor loss;
  if (closure) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  for (size_t g = 0; g < param_groups_.size(); ++g) {
    auto& group = param_groups_[g];
    const auto& o = static_cast<const DecoupledSGDWOptions&>(group.options());
    std::vector<at::Tensor> params, grads;
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      params.push_back(p);
      grads.push_back(p.grad());
    }
    if (params.empty()) continue;
    std::vector<at::Tensor> directions = grads;
    if (o.momentum() != 0) {
      std::vector<at::Tensor> bufs, old_bufs, old_grads;
      for (size_t i = 0; i < params.size(); ++i) {
        auto [it, fresh] = momentum_buffers_.try_emplace(params[i].unsafeGetTensorImpl());
        if (fresh) {
          it->second = grads[i].clone().detach();
        } else {
          old_bufs.push_back(it->second);
          old_grads.push_back(grads[i]);
        }
        bufs.push_back(it->second);
      }
      if (!old_bufs.empty()) {
        at::_foreach_mul_(old_bufs, o.momentum());
        at::_foreach_add_(old_bufs, old_grads, 1.0 - o.dampening());
      }
      directions = o.nesterov() ? at::_foreach_add(grads, bufs, o.momentum()) : bufs;
    }
    if (graph_capture_) {  // the same arithmetic with the scalars read from the device
      if (o.weight_decay() != 0) at::_foreach_mul_(params, graph_decays_[g]);
      at::_foreach_add_(params, at::_foreach_mul(directions, graph_neg_lrs_[g]));
      continue;
    }
    if (o.weight_decay() != 0) at::_foreach_mul_(params, 1.0 - detail::decay_factor(o) * o.weight_decay());
    at::_foreach_add_(params, directions, -o.lr());
  }
  return loss;
}

c10::IValue DecoupledSGDW::state_dict() const {
  return detail::make_state_dict(
      param_groups_,
      [&](const at::Tensor& p) -> c10::optional<Dict> {
        auto it = momentum_buffers_.find(p.unsafeGetTensorImpl());
        if (it == momentum_buffers_.end()) return c10::nullopt;
        Dict d = new_dict();
        d.insert("momentum_buffer", it->second);
        return d;
      },
      detail::group_fields<DecoupledSGDWOptions>);
}

void DecoupledSGDW::load_state_dict(const c10::IValue& state) {
  momentum_buffers_.clear();
  detail::load_state_dict(
      "DecoupledSGDW", param_groups_, state,
      [&](const at::Tensor& p, const Dict& d) {
        momentum_buffers_[p.unsafeGetTensorImpl()] =
            dict_get(d, "momentum_buffer", "DecoupledSGDW state").toTensor().to(p.device(), p.scalar_type()).clone();
      },
      [](torch::optim::OptimizerOptions& opts, const Dict& d) {
        detail::load_group_fields<DecoupledSGDWOptions>(opts, d, "DecoupledSGDW");
      });
}

}  // namespace composer::optim
