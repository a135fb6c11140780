// The sharding units gathered around their own passes, as torch FSDP's forward and backward hooks do. A unit that is
// a composer::nn::Layer under a composer::nn::Composite is replaced by a UnitLayer holding it:
//   forward:  all-gather the unit (or finish its prefetch), run it, free it again (FULL_SHARD; SHARD_GRAD_OP keeps
//             it until its backward), and hook its output's gradient;
//   that hook (the unit's backward is next): all-gather it again, prefetch the unit before it (BACKWARD_PRE);
//   a gradient hook on each of its trainable parameters, after the gradient is accumulated: once all of them have
//   fired, no op of the unit needs them any more: its gradient's reduce-scatter starts in the background (on the
//   step's last microbatch), its trainable weights are freed, and the unit before it is prefetched (BACKWARD_POST);
//   its frozen weights (requires_grad false) are needed until the backward has carried the gradient through to the
//   unit's input (a LoRA layer's base after its adapters' gradients are in): they are freed by a hook on the
//   input's gradient (torch FSDP's reshard-only hook), or when the backward ends if the input needs none.
// Every rank runs the same units in the same order, so every rank issues the same collectives in the same order.
#include "composer/nn/layer.h"
#include "dist/detail/fully_sharded_impl.h"

#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <limits>
#include <map>

namespace composer::dist {

class FullyShardedDataParallel::Impl::UnitLayer final : public nn::Layer {
 public:
  UnitLayer(std::shared_ptr<nn::Layer> inner, std::shared_ptr<Impl*> engine, int64_t unit)
      : inner_(std::move(inner)), engine_(std::move(engine)), unit_(unit) {
    adopt_members_of(*inner_);
  }
  nn::Layer* stands_in_for() const override { return inner_.get(); }

  at::Tensor forward(const at::Tensor& x) override {
    Impl* m = *engine_;
    if (!m || !m->training_forward) return inner_->forward(x);  // evaluation: enter() gathered the whole model
    m->unit_pre_forward(unit_);
    at::Tensor out;
    try {
      out = inner_->forward(x);
    } catch (...) {
      m->release_unit(unit_);
      throw;
    }
    m->unit_post_forward(unit_, x, out);
    return out;
  }

 private:
  std::shared_ptr<nn::Layer> inner_;
  std::shared_ptr<Impl*> engine_;
  int64_t unit_;
};

class FullyShardedDataParallel::Impl::GradientHook final : public torch::autograd::PostAccumulateGradHook {
 public:
  GradientHook(std::shared_ptr<Impl*> engine, int64_t unit) : engine_(std::move(engine)), unit_(unit) {}
  void operator()(const torch::autograd::Variable&) override {
    if (Impl* m = *engine_) m->unit_gradient_accumulated(unit_);
  }

 private:
  std::shared_ptr<Impl*> engine_;
  int64_t unit_;
};

namespace {

// The unit whose backward comes after u's (the one before it in the forward), or -1.
int64_t before_in(const std::vector<int64_t>& order, int64_t u) {
  for (size_t i = order.size(); i-- > 0;)
    if (order[i] == u) return i == 0 ? -1 : order[i - 1];
  return -1;
}

// The unit whose forward came after u's in `order`, or -1.
int64_t after_in(const std::vector<int64_t>& order, int64_t u) {
  for (size_t i = 0; i < order.size(); ++i)
    if (order[i] == u) return i + 1 < order.size() ? order[i + 1] : -1;
  return -1;
}

}  // namespace

void FullyShardedDataParallel::Impl::unit_pre_forward(int64_t u) {
  order.push_back(u);
  gather_unit(u);
  if (forward_prefetch)
    if (const int64_t next = after_in(last_order, u); next >= 0) prefetch_unit(next);
}

void FullyShardedDataParallel::Impl::unit_post_forward(int64_t u, const at::Tensor& input, const at::Tensor& output) {
  if (frees_after_forward()) release_unit(u);
  if (!at::GradMode::is_enabled() || !output.defined() || !output.requires_grad()) return;
  std::shared_ptr<Impl*> engine = self;
  output.register_hook([engine, u](const at::TensorBase&) {
    if (Impl* m = *engine) m->unit_pre_backward(u);
  });
  if (units[static_cast<size_t>(u)].has_frozen && input.requires_grad()) {
    input.register_hook([engine, u](const at::TensorBase&) {
      if (Impl* m = *engine; m && m->in_backward) m->release_unit_part(u, /*frozen=*/true);
    });
  }
}

void FullyShardedDataParallel::Impl::unit_pre_backward(int64_t u) {
  if (!in_backward) return;
  gather_unit(u);
  if (backward_prefetch == BackwardPrefetch::BACKWARD_PRE)
    if (const int64_t next = before_in(order, u); next >= 0) prefetch_unit(next);
}

void FullyShardedDataParallel::Impl::unit_gradient_accumulated(int64_t u) {
  if (!in_backward) return;
  Unit& unit = units[static_cast<size_t>(u)];
  if (--unit.waiting != 0) return;
  if (sync) start_reduction(u);
  release_unit_part(u, /*frozen=*/false);
  if (backward_prefetch == BackwardPrefetch::BACKWARD_POST)
    if (const int64_t next = before_in(order, u); next >= 0) prefetch_unit(next);
}

void FullyShardedDataParallel::Impl::begin_backward(bool reduce) {
  in_backward = true;
  sync = reduce;
  std::map<int64_t, int64_t> runs;
  for (const int64_t u : order) ++runs[u];
  for (size_t u = 0; u < units.size(); ++u) {
    // A unit that ran more than once (or not at all) in the forward is reduced after the backward: under activation
    // checkpointing each run's recomputation accumulates its gradients separately.
    const auto it = runs.find(static_cast<int64_t>(u));
    const bool once = it != runs.end() && it->second == 1;
    units[u].waiting = units[u].per_unit && once ? units[u].params : std::numeric_limits<int64_t>::max();
  }
}

int64_t FullyShardedDataParallel::Impl::wrap_units(torch::nn::Module& model,
                                                   const std::vector<torch::nn::Module*>& modules) {
  if (!sharded()) return 0;
  std::map<std::string, torch::nn::Module*> by_name{{"", &model}};
  std::map<const torch::nn::Module*, std::shared_ptr<torch::nn::Module>> owned;
  for (const auto& item : model.named_modules("", /*include_self=*/false)) {
    by_name[item.key()] = item.value().get();
    owned[item.value().get()] = item.value();
  }
  int64_t wrapped = 0;
  for (size_t u = 0; u < units.size(); ++u) {
    Unit& unit = units[u];
    if (!modules[u] || unit.name.empty()) continue;
    const auto dot = unit.name.rfind('.');
    auto* parent = dynamic_cast<nn::Composite*>(by_name.at(dot == std::string::npos ? "" : unit.name.substr(0, dot)));
    auto layer = std::dynamic_pointer_cast<nn::Layer>(owned.at(modules[u]));
    const std::string child = dot == std::string::npos ? unit.name : unit.name.substr(dot + 1);
    if (!parent || !layer || !parent->has(child)) continue;  // gathered with the whole model instead
    parent->replace(child, std::make_shared<UnitLayer>(layer, self, static_cast<int64_t>(u)));
    unit.per_unit = true;
    for (const int64_t k : unit.flats) {
      if (flats[static_cast<size_t>(k)].frozen) continue;
      for (const auto& p : flats[static_cast<size_t>(k)].params)
        torch::autograd::impl::set_post_acc_grad_hooks(p,
                                                       std::make_unique<GradientHook>(self, static_cast<int64_t>(u)));
    }
    ++wrapped;
  }
  return wrapped;
}

}  // namespace composer::dist
