#include "checkpoint/detail/background_write.h"

#include <ATen/ATen.h>

namespace composer::detail {

c10::IValue host_copy(const c10::IValue& v) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (!t.defined()) return v;
    // One copy, of the tensor's own elements (a view's storage is not kept): a clone on the CPU, the transfer from a
    // device (which already makes a fresh tensor; cloning it again doubled the host memory of an async save).
    const at::Tensor d = t.detach();
    if (d.is_cpu()) return d.clone(at::MemoryFormat::Contiguous);
    return d.to(at::kCPU, /*non_blocking=*/false, /*copy=*/false, at::MemoryFormat::Contiguous);
  }
  if (v.isGenericDict()) {
    const auto d = v.toGenericDict();
    c10::impl::GenericDict out(d.keyType(), d.valueType());
    for (const auto& item : d) out.insert(item.key(), host_copy(item.value()));
    return out;
  }
  if (v.isList()) {
    const auto l = v.toList();
    c10::impl::GenericList out(l.elementType());
    for (const auto& item : l) out.push_back(host_copy(item.get()));
    return out;
  }
  if (v.isTuple()) {
    std::vector<c10::IValue> items;
    for (const auto& item : v.toTupleRef().elements()) items.push_back(host_copy(item));
    return c10::ivalue::Tuple::create(std::move(items));
  }
  return v;
}

BackgroundWrite::BackgroundWrite(std::function<void()> write)
    : thread_([this, write = std::move(write)] {
        try {
          write();
        } catch (const std::exception& e) {
          error_ = e.what();
        } catch (...) {
          error_ = "unknown error";
        }
        done_ = true;
      }) {}

BackgroundWrite::~BackgroundWrite() {
  if (thread_.joinable()) thread_.join();
}

std::string BackgroundWrite::wait() {
  if (thread_.joinable()) thread_.join();
  return error_;
}

bool BackgroundWrite::done() const { return done_; }

}  // namespace composer::detail
