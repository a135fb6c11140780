#include "composer/optim/grad_scaler.h"

#include "composer/core/serialization.h"

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <map>
#include <mutex>
#include <stdexcept>

namespace composer {
namespace {

// Whether the fused _amp_ kernels run on `device` (not every backend has them); probed once per device type.
bool fused_amp_available(const at::Device& device) {
  static std::mutex mu;
  static std::map<c10::DeviceType, bool> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(device.type());
  if (it != cache.end()) return it->second;
  bool ok = true;
  try {
    auto opts = at::TensorOptions().device(device);
    std::vector<at::Tensor> probe{at::ones({1}, opts)};
    auto found = at::zeros({1}, opts.dtype(at::kFloat));
    at::_amp_foreach_non_finite_check_and_unscale_(probe, found, at::ones({1}, opts.dtype(at::kFloat)));
  } catch (const c10::Error&) {
    ok = false;
  }
  cache[device.type()] = ok;
  return ok;
}

}  // namespace

void GradScalerOptions::validate() const {
  if (init_scale_ <= 0) throw std::invalid_argument("GradScaler.init_scale must be > 0");
  if (growth_factor_ <= 1) throw std::invalid_argument("GradScaler.growth_factor must be > 1");
  if (backoff_factor_ <= 0 || backoff_factor_ >= 1)
    throw std::invalid_argument("GradScaler.backoff_factor must be in (0, 1)");
  if (growth_interval_ <= 0) throw std::invalid_argument("GradScaler.growth_interval must be > 0");
}

GradScaler::GradScaler(GradScalerOptions options) : options_(options) { options_.validate(); }

void GradScaler::lazy_init(const at::Device& device) {
  if (scale_.defined()) {
    if (scale_.device() != device) {
      scale_ = scale_.to(device);
      growth_tracker_ = growth_tracker_.to(device);
    }
    return;
  }
  scale_ = at::full({1}, options_.init_scale(), at::TensorOptions().dtype(at::kFloat).device(device));
  growth_tracker_ = at::zeros({1}, at::TensorOptions().dtype(at::kInt).device(device));
}

at::Tensor GradScaler::scale(const at::Tensor& loss) {
  if (!options_.enabled()) return loss;
  lazy_init(loss.device());
  return loss * scale_.to(loss.scalar_type());
}

void GradScaler::unscale_(torch::optim::Optimizer& optimizer) {
  if (!options_.enabled()) return;
  if (unscaled_) throw std::logic_error("GradScaler.unscale_ was already called for this step; call update() first");
  std::vector<at::Tensor> grads;
  for (auto& g : optimizer.param_groups())
    for (auto& p : g.params())
      if (p.grad().defined()) grads.push_back(p.grad());
  const at::Device device =
      grads.empty() ? (scale_.defined() ? scale_.device() : at::Device(at::kCPU)) : grads.front().device();
  lazy_init(device);
  at::NoGradGuard no_grad;
  const at::Tensor inv_scale = scale_.to(at::kDouble).reciprocal().to(at::kFloat);
  found_inf_ = at::zeros({1}, scale_.options());
  if (!grads.empty() && fused_amp_available(device)) {
    at::_amp_foreach_non_finite_check_and_unscale_(grads, found_inf_, inv_scale);
  } else {
    for (auto& g : grads) {
      found_inf_.add_(g.isfinite().logical_not().any().to(at::kFloat));
      g.mul_(inv_scale.to(g.scalar_type()));
    }
    found_inf_.clamp_max_(1.0);
  }
  unscaled_ = true;
}

bool GradScaler::step(torch::optim::Optimizer& optimizer) {
  if (!options_.enabled()) {
    optimizer.step();
    return true;
  }
  if (!unscaled_) unscale_(optimizer);
  if (found_inf_.item<float>() > 0) return false;
  optimizer.step();
  return true;
}

void GradScaler::update() {
  if (!options_.enabled() || !scale_.defined()) return;
  const at::Tensor found = found_inf_.defined() ? found_inf_ : at::zeros({1}, scale_.options());
  if (fused_amp_available(scale_.device())) {
    at::_amp_update_scale_(scale_, growth_tracker_, found, options_.growth_factor(), options_.backoff_factor(),
                           options_.growth_interval());
  } else if (found.item<float>() > 0) {
    scale_.mul_(options_.backoff_factor());
    growth_tracker_.zero_();
  } else {
    growth_tracker_.add_(1);
    if (growth_tracker_.item<int>() >= options_.growth_interval()) {
      scale_.mul_(options_.growth_factor());
      growth_tracker_.zero_();
    }
  }
  reset_step();
}

void GradScaler::reset_step() {
  unscaled_ = false;
  found_inf_ = at::Tensor();
}

double GradScaler::get_scale() const { return scale_.defined() ? scale_.item<float>() : options_.init_scale(); }
bool GradScaler::found_inf() const { return found_inf_.defined() && found_inf_.item<float>() > 0; }

c10::IValue GradScaler::state_dict() const {
  Dict d = new_dict();
  d.insert("scale", get_scale());
  d.insert("growth_factor", options_.growth_factor());
  d.insert("backoff_factor", options_.backoff_factor());
  d.insert("growth_interval", options_.growth_interval());
  d.insert("_growth_tracker", static_cast<int64_t>(growth_tracker_.defined() ? growth_tracker_.item<int>() : 0));
  return d;
}

void GradScaler::load_state_dict(const c10::IValue& state) {
  if (!state.isGenericDict()) throw std::invalid_argument("GradScaler state_dict must be a dict");
  const Dict d = state.toGenericDict();
  options_.growth_factor(dict_get(d, "growth_factor", "GradScaler state").toDouble());
  options_.backoff_factor(dict_get(d, "backoff_factor", "GradScaler state").toDouble());
  options_.growth_interval(dict_get(d, "growth_interval", "GradScaler state").toInt());
  const at::Device device = scale_.defined() ? scale_.device() : at::Device(at::kCPU);
  scale_ = at::full({1}, dict_get(d, "scale", "GradScaler state").toDouble(),
                    at::TensorOptions().dtype(at::kFloat).device(device));
  growth_tracker_ = at::full({1}, dict_get(d, "_growth_tracker", "GradScaler state").toInt(),
                             at::TensorOptions().dtype(at::kInt).device(device));
  reset_step();
}

}  // namespace composer
