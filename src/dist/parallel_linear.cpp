#include "dist/detail/parallel_linear.h"

#include "composer/dist/collective_check.h"
#include "dist/detail/sequence_parallel.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <deque>
#include <mutex>

namespace composer::dist::detail {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The groups the layers run their collectives over, by number.
std::mutex registry_mutex;
std::deque<Group>& registry() {
  static std::deque<Group> groups;
  return groups;
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

// The slices of the last dimension put together; the backward keeps this rank's slice of the gradient.
struct GatherFromGroup : public torch::autograd::Function<GatherFromGroup> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, int64_t group) {
    const Group g = group_at(group);
    ctx->saved_data["begin"] = g.rank() * x.size(-1);
    ctx->saved_data["width"] = x.size(-1);
    return gathered_along(x, -1, group);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const int64_t begin = ctx->saved_data["begin"].toInt(), width = ctx->saved_data["width"].toInt();
    return {grads[0].narrow(-1, begin, width).contiguous(), at::Tensor()};
  }
};

// Automatic microbatching's check before a collective on x. Under it, `elements` of x's type are allocated and freed
// first: what the collective allocates inside (Gloo copies through buffers of the data's size, on its own threads),
// with slack, so that a rank short of memory runs out here, before the check, and not inside the collective where its
// peers would wait. With only the collective's own sizes (no slack) a rank under a 60 MiB limit still ran out inside a
// tensor-parallel all-gather (TensorParallelTest.AutoMicrobatchingUnderTpShrinksEveryRankAndEqualsOneProcess).
void check_before(const at::Tensor& x, int64_t elements) {
  if (collective_check_active() && x.is_cpu()) (void)at::empty({elements}, x.options());
  check_before_collective();
}

}  // namespace

Group group_at(int64_t id) {
  std::lock_guard<std::mutex> lock(registry_mutex);
  return registry().at(static_cast<size_t>(id));
}

at::Tensor summed_over(const at::Tensor& x, int64_t id) {
  at::Tensor out = x.contiguous().clone();
  check_before(out, 4 * out.numel());  // Gloo's working copies of the data, twice for slack
  all_reduce(out, ReduceOp::SUM, group_at(id));
  return out;
}

at::Tensor gathered_along(const at::Tensor& x, int64_t dim, int64_t id) {
  const Group g = group_at(id);
  // The gathered pieces, Gloo's flat copies of the input and the output, and their concatenation, twice for slack.
  check_before(x, 8 * g.size() * x.numel());
  return at::cat(all_gather(x.contiguous(), g), dim);
}

int64_t register_group(const Group& group) {
  std::lock_guard<std::mutex> lock(registry_mutex);
  registry().push_back(group);
  return static_cast<int64_t>(registry().size()) - 1;
}

at::Tensor copy_to_group(const at::Tensor& x, int64_t id) { return CopyToGroup::apply(x, id); }
at::Tensor reduce_from_group(const at::Tensor& x, int64_t id) { return ReduceFromGroup::apply(x, id); }
at::Tensor gather_from_group(const at::Tensor& x, int64_t id) { return GatherFromGroup::apply(x, id); }

ParallelLinear::ParallelLinear(const nn::Linear& inner, nn::ParallelStyle style, const Group& group,
                               bool sequence_parallel)
    : style_(style),
      sequence_parallel_(sequence_parallel),
      group_(register_group(group)),
      weight_(inner.weight),
      bias_(inner.bias),
      local_features_(inner.weight.size(style == nn::ParallelStyle::COLWISE ? 0 : 1)) {
  adopt_members_of(inner);
}

at::Tensor ParallelLinear::forward(const at::Tensor& x) {
  if (weight_.size(style_ == nn::ParallelStyle::COLWISE ? 0 : 1) != local_features_)
    return at::linear(x, weight_, bias_);  // whole weights
  const bool split = sequence_split(sequence_parallel_, is_training());
  // Under sequence parallelism the norm before it gathered the input, and the gather's backward sums the gradient.
  if (style_ == nn::ParallelStyle::COLWISE) return at::linear(split ? x : copy_to_group(x, group_), weight_, bias_);
  const at::Tensor partial = at::linear(x, weight_);
  if (!split) {
    const at::Tensor y = reduce_from_group(partial, group_);
    return bias_.defined() ? y + bias_ : y;
  }
  // The bias is added on this rank's slice of the sequence: its gradient is the slices' sum (Megatron's f on it).
  const at::Tensor y = scatter_sequence(partial, group_);
  return bias_.defined() ? y + copy_to_group(bias_, group_) : y;
}

}  // namespace composer::dist::detail
