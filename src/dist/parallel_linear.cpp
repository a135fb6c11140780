#include "dist/detail/parallel_linear.h"

#include "composer/dist/collective_check.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <deque>
#include <mutex>

namespace composer::dist::detail {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The groups the layers run their collectives over, by number (an autograd context keeps IValues only).
std::mutex registry_mutex;
std::deque<Group>& registry() {
  static std::deque<Group> groups;
  return groups;
}
int64_t register_group(const Group& group) {
  std::lock_guard<std::mutex> lock(registry_mutex);
  registry().push_back(group);
  return static_cast<int64_t>(registry().size()) - 1;
}
Group group_at(int64_t id) {
  std::lock_guard<std::mutex> lock(registry_mutex);
  return registry().at(static_cast<size_t>(id));
}

at::Tensor summed_over(const at::Tensor& t, int64_t group) {
  at::Tensor out = t.contiguous().clone();
  check_before_collective();  // automatic microbatching's agreement, as before FSDP's collectives
  all_reduce(out, ReduceOp::SUM, group_at(group));
  return out;
}

// Megatron's f: the identity forward, the gradient summed over the group.
struct CopyToGroup : public torch::autograd::Function<CopyToGroup> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, int64_t group) {
    ctx->saved_data["group"] = group;
    return x;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {summed_over(grads[0], ctx->saved_data["group"].toInt()), at::Tensor()};
  }
};

// Megatron's g: the forward summed over the group, the identity backward.
struct ReduceFromGroup : public torch::autograd::Function<ReduceFromGroup> {
  static at::Tensor forward(AutogradContext*, const at::Tensor& x, int64_t group) { return summed_over(x, group); }
  static variable_list backward(AutogradContext*, variable_list grads) { return {grads[0], at::Tensor()}; }
};

}  // namespace

ParallelLinear::ParallelLinear(const nn::Linear& inner, nn::ParallelStyle style, const Group& group)
    : style_(style), group_(register_group(group)), weight_(inner.weight), bias_(inner.bias) {
  adopt_members_of(inner);
}

at::Tensor ParallelLinear::forward(const at::Tensor& x) {
  if (style_ == nn::ParallelStyle::COLWISE) return at::linear(CopyToGroup::apply(x, group_), weight_, bias_);
  at::Tensor y = ReduceFromGroup::apply(at::linear(x, weight_), group_);
  return bias_.defined() ? y + bias_ : y;
}

}  // namespace composer::dist::detail
