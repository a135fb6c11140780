#include "composer/nn/checkpoint.h"

#include "composer/utils/compat.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include <map>
#include <mutex>
#include <stdexcept>

namespace composer::nn {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr c10::DeviceType kAutocastDevices[] = {c10::kCPU, c10::kCUDA};

// The random and autocast state a recomputation must replay.
struct ReplayState {
  at::Tensor cpu_rng;
  std::optional<c10::Device> cuda;
  at::Tensor cuda_rng;
  bool autocast[2] = {false, false};
  at::ScalarType autocast_dtype[2] = {at::kFloat, at::kFloat};

  static ReplayState capture(const at::Tensor& x) {
    ReplayState s;
    s.cpu_rng = at::detail::getDefaultCPUGenerator().get_state();
    if (x.is_cuda()) {
      s.cuda = x.device();
      s.cuda_rng = at::globalContext().defaultGenerator(x.device()).get_state();
    }
    for (int i = 0; i < 2; ++i) {
      s.autocast[i] = compat::autocast_enabled(kAutocastDevices[i]);
      s.autocast_dtype[i] = compat::autocast_dtype(kAutocastDevices[i]);
    }
    return s;
  }
  // Puts this state in place and returns the one it replaced.
  ReplayState swap_in() const {
    ReplayState previous;
    const auto exchange = [](at::Generator gen, const at::Tensor& state) {  // a handle: shares the generator
      std::lock_guard<std::mutex> lock(gen.mutex());
      at::Tensor old = gen.get_state();
      gen.set_state(state);
      return old;
    };
    previous.cpu_rng = exchange(at::detail::getDefaultCPUGenerator(), cpu_rng);
    if (cuda) {
      previous.cuda = cuda;
      previous.cuda_rng = exchange(at::globalContext().defaultGenerator(*cuda), cuda_rng);
    }
    for (int i = 0; i < 2; ++i) {
      previous.autocast[i] = compat::autocast_enabled(kAutocastDevices[i]);
      previous.autocast_dtype[i] = compat::autocast_dtype(kAutocastDevices[i]);
      compat::set_autocast_enabled(kAutocastDevices[i], autocast[i]);
      compat::set_autocast_dtype(kAutocastDevices[i], autocast_dtype[i]);
    }
    return previous;
  }
};

// forward(x, anchor): inner(x) with no graph kept; `anchor` is an empty tensor that needs a gradient, so that the
// output needs one (and backward runs) even when x does not.
class CheckpointFunction : public torch::autograd::Function<CheckpointFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& anchor, Layer* layer,
                            bool offload) {
    (void)anchor;
    const ReplayState s = ReplayState::capture(x);
    auto& d = ctx->saved_data;
    d["layer"] = reinterpret_cast<int64_t>(layer);
    d["cpu_rng"] = s.cpu_rng;
    if (s.cuda) {
      d["cuda_index"] = static_cast<int64_t>(s.cuda->index());
      d["cuda_rng"] = s.cuda_rng;
    }
    for (int i = 0; i < 2; ++i) {
      d["autocast" + std::to_string(i)] = s.autocast[i];
      d["autocast_dtype" + std::to_string(i)] = static_cast<int64_t>(s.autocast_dtype[i]);
    }
    if (offload) {  // the input's values wait in host memory; the recomputation's input is a leaf anyway
      at::Tensor host = x.detach();
      if (!x.is_cpu()) {
        host = at::empty(x.sizes(), x.options().device(c10::kCPU).pinned_memory(true).requires_grad(false));
        host.copy_(x.detach(), /*non_blocking=*/true);
      }
      d["offloaded"] = host;
      d["device"] = x.device().str();
      d["requires_grad"] = x.requires_grad();
    } else {
      ctx->save_for_backward({x});
    }
    return layer->forward(x);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    auto& d = ctx->saved_data;
    auto* layer = reinterpret_cast<Layer*>(d["layer"].toInt());
    ReplayState replay;
    replay.cpu_rng = d["cpu_rng"].toTensor();
    if (d.count("cuda_index")) {
      replay.cuda = c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(d["cuda_index"].toInt()));
      replay.cuda_rng = d["cuda_rng"].toTensor();
    }
    for (int i = 0; i < 2; ++i) {
      replay.autocast[i] = d["autocast" + std::to_string(i)].toBool();
      replay.autocast_dtype[i] = static_cast<at::ScalarType>(d["autocast_dtype" + std::to_string(i)].toInt());
    }
    at::Tensor input;
    if (d.count("offloaded")) {
      input = d["offloaded"].toTensor().to(c10::Device(d["device"].toStringRef()), /*non_blocking=*/true);
      input.requires_grad_(d["requires_grad"].toBool());
    } else {
      const at::Tensor x = ctx->get_saved_variables()[0];
      input = x.detach().requires_grad_(x.requires_grad());
    }
    at::Tensor out;
    const ReplayState previous = replay.swap_in();
    try {
      at::AutoGradMode grad(true);
      out = layer->forward(input);
    } catch (...) {
      previous.swap_in();
      throw;
    }
    previous.swap_in();
    if (out.requires_grad()) torch::autograd::backward({out}, {grad_outputs[0]});
    return {input.requires_grad() ? input.grad() : at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

CheckpointedLayer::CheckpointedLayer(std::shared_ptr<Layer> inner, bool offload_input)
    : inner_(std::move(inner)), offload_input_(offload_input) {
  if (!inner_) throw std::invalid_argument("CheckpointedLayer: the layer is null");
  adopt_members_of(*inner_);
}

at::Tensor CheckpointedLayer::forward(const at::Tensor& x) {
  if (!at::GradMode::is_enabled()) return inner_->forward(x);  // evaluation: nothing to keep anyway
  return CheckpointFunction::apply(x, at::empty({0}, x.options().dtype(at::kFloat)).requires_grad_(), inner_.get(),
                                   offload_input_);
}

int64_t apply_activation_checkpointing(torch::nn::Module& model, const CheckpointPolicy& policy, bool offload_input) {
  std::map<std::string, std::shared_ptr<torch::nn::Module>> by_name;
  std::vector<std::string> picked;
  for (const auto& item : model.named_modules("", /*include_self=*/false)) {
    by_name[item.key()] = item.value();
    bool inside_picked = false;
    for (const auto& outer : picked) inside_picked = inside_picked || item.key().rfind(outer + ".", 0) == 0;
    if (!inside_picked && policy(item.key(), *item.value())) picked.push_back(item.key());
  }
  for (const auto& name : picked) {
    const auto dot = name.rfind('.');
    torch::nn::Module& parent = dot == std::string::npos ? model : *by_name.at(name.substr(0, dot));
    const std::string child = dot == std::string::npos ? name : name.substr(dot + 1);
    auto* composite = dynamic_cast<Composite*>(&parent);
    auto layer = std::dynamic_pointer_cast<Layer>(by_name.at(name));
    if (!composite || !layer) {
      throw std::invalid_argument("activation checkpointing: cannot wrap '" + name + "' (" + by_name.at(name)->name() +
                                  "): only a composer::nn::Layer called through a composer::nn::Composite parent can "
                                  "be replaced, and its parent is " +
                                  parent.name());
    }
    composite->replace(child, std::make_shared<CheckpointedLayer>(layer, offload_input));
  }
  return static_cast<int64_t>(picked.size());
}

}  // namespace composer::nn
