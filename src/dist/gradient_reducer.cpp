#include "composer/dist/gradient_reducer.h"

#include <torch/torch.h>

#include <mutex>

namespace composer::dist {

struct GradientReducer::Impl {
  struct Slot {
    at::Tensor param;
    size_t bucket = 0;
    int64_t offset = 0;  // elements into the bucket's flat buffer
  };
  struct Bucket {
    at::Tensor flat;
    std::vector<size_t> slots;
    size_t ready = 0;
    bool launched = false;
    Handle handle;
  };
  std::vector<Slot> slots;
  std::vector<Bucket> buckets;
  std::vector<bool> arrived;
  bool active = false;
  std::mutex mu;  // autograd may run hooks from its worker threads

  void launch(Bucket& b) {
    b.launched = true;
    b.handle = all_reduce_async(b.flat);
  }

  // Called from the parameter's hook with the gradient flowing into it (before it is added to .grad).
  void on_grad(size_t index, const at::Tensor& incoming) {
    std::lock_guard<std::mutex> lock(mu);
    if (!active || arrived[index]) return;
    Slot& s = slots[index];
    Bucket& b = buckets[s.bucket];
    at::Tensor view = b.flat.narrow(0, s.offset, s.param.numel()).view(s.param.sizes());
    const at::Tensor& previous = s.param.grad();
    if (previous.defined()) {
      at::add_out(view, previous, incoming);  // what .grad will hold once autograd accumulates
    } else {
      view.copy_(incoming);
    }
    arrived[index] = true;
    if (++b.ready == b.slots.size()) launch(b);
  }
};

GradientReducer::GradientReducer(std::vector<at::Tensor> params, int64_t bucket_bytes)
    : impl_(std::make_shared<Impl>()) {
  std::vector<at::Tensor> trainable;
  for (auto& p : params)
    if (p.requires_grad()) trainable.push_back(p);
  std::reverse(trainable.begin(), trainable.end());  // backward produces the last layers' gradients first
  auto& impl = *impl_;
  int64_t used = 0;
  for (size_t i = 0; i < trainable.size(); ++i) {
    const at::Tensor& p = trainable[i];
    const int64_t bytes = p.numel() * static_cast<int64_t>(p.element_size());
    // The first bucket is small (1 MB, as in PyTorch's DDP) so its all-reduce starts early in the backward pass.
    const int64_t cap = impl.buckets.size() <= 1 ? std::min<int64_t>(bucket_bytes, 1024 * 1024) : bucket_bytes;
    const bool fresh = impl.buckets.empty() || used + bytes > cap ||
                       impl.slots[impl.buckets.back().slots.front()].param.scalar_type() != p.scalar_type() ||
                       impl.slots[impl.buckets.back().slots.front()].param.device() != p.device();
    if (fresh) {
      impl.buckets.emplace_back();
      used = 0;
    }
    Impl::Slot slot;
    slot.param = p;
    slot.bucket = impl.buckets.size() - 1;
    slot.offset = used / static_cast<int64_t>(p.element_size());
    impl.buckets.back().slots.push_back(i);
    impl.slots.push_back(slot);
    used += bytes;
  }
  for (auto& b : impl.buckets) {
    int64_t n = 0;
    for (size_t s : b.slots) n += impl.slots[s].param.numel();
    const at::Tensor& first = impl.slots[b.slots.front()].param;
    b.flat = at::zeros({n}, first.options().requires_grad(false));
  }
  impl.arrived.assign(impl.slots.size(), false);
  std::weak_ptr<Impl> weak = impl_;
  for (size_t i = 0; i < impl.slots.size(); ++i) {
    impl.slots[i].param.register_hook([weak, i](const at::Tensor& grad) {
      if (auto self = weak.lock()) self->on_grad(i, grad);
      return grad;
    });
  }
}

// The all-reduces still in flight write into the buckets, so they are waited for. A destructor runs while an error
// unwinds too, typically the failed wait of this very step after a peer died: that bucket's wait is not repeated
// (Handle drops its wait function before running it), but the buckets launched after it fail here as well. A throw
// from a destructor is std::terminate ("terminate called after throwing ..."), so their errors are dropped: the error
// already unwinding, or the next collective's, names the dead peer.
GradientReducer::~GradientReducer() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  for (auto& b : impl_->buckets) {
    try {
      b.handle.wait();
    } catch (const std::exception&) {
    }
  }
}

size_t GradientReducer::num_buckets() const { return impl_->buckets.size(); }

void GradientReducer::prepare(bool sync) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->active = sync && get_world_size() > 1;
  std::fill(impl_->arrived.begin(), impl_->arrived.end(), false);
  for (auto& b : impl_->buckets) {
    b.ready = 0;
    b.launched = false;
  }
}

void GradientReducer::finalize() {
  auto& impl = *impl_;
  std::lock_guard<std::mutex> lock(impl.mu);
  if (!impl.active) return;
  impl.active = false;
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < impl.slots.size(); ++i) {
    if (impl.arrived[i]) continue;  // unused in this step: its accumulated gradient (or zeros) joins the average
    auto& s = impl.slots[i];
    auto& b = impl.buckets[s.bucket];
    at::Tensor view = b.flat.narrow(0, s.offset, s.param.numel()).view(s.param.sizes());
    if (s.param.grad().defined()) {
      view.copy_(s.param.grad());
    } else {
      view.zero_();
    }
    impl.arrived[i] = true;
    if (++b.ready == b.slots.size() && !b.launched) impl.launch(b);
  }
  for (auto& b : impl.buckets) {
    if (!b.launched) impl.launch(b);
  }
  const double world = static_cast<double>(get_world_size());
  for (auto& b : impl.buckets) {
    b.handle.wait();
    b.flat.div_(world);
    for (size_t si : b.slots) {
      auto& s = impl.slots[si];
      at::Tensor avg = b.flat.narrow(0, s.offset, s.param.numel()).view(s.param.sizes());
      if (s.param.grad().defined()) {
        s.param.mutable_grad().copy_(avg);
      } else {
        s.param.mutable_grad() = avg.clone();
      }
    }
  }
}

void broadcast_module(const std::vector<at::Tensor>& tensors, int64_t src) {
  if (get_world_size() == 1) return;
  at::NoGradGuard no_grad;
  for (const auto& t : tensors) {
    at::Tensor data = t.detach();
    if (data.is_contiguous()) {
      broadcast(data, src);
    } else {
      at::Tensor c = data.contiguous();
      broadcast(c, src);
      data.copy_(c);
    }
  }
}

}  // namespace composer::dist
