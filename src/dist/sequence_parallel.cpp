#include "dist/detail/sequence_parallel.h"

#include "dist/detail/parallel_linear.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <stdexcept>
#include <string>

namespace composer::dist::detail {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr int64_t kSequence = 1;  // [batch, sequence, features]

// The length of each rank's slice of x's sequence; std::invalid_argument when the degree does not divide it.
int64_t slice_width(const at::Tensor& x, const Group& g) {
  if (x.dim() < 2 || x.size(kSequence) % g.size() != 0) {
    throw std::invalid_argument("parallelism_config.tp.sequence_parallel: the sequence length " +
                                (x.dim() < 2 ? std::string("(a tensor of ") + std::to_string(x.dim()) + " dimensions)"
                                             : std::to_string(x.size(kSequence))) +
                                " does not split in tensor_parallel_degree " + std::to_string(g.size()) +
                                " equal slices; train on sequences whose length the degree divides");
  }
  return x.size(kSequence) / g.size();
}

// This rank's slice of x's sequence.
at::Tensor slice_of(const at::Tensor& x, int64_t group) {
  const Group g = group_at(group);
  const int64_t width = slice_width(x, g);
  return x.narrow(kSequence, g.rank() * width, width).contiguous();
}

// The sum over the group, this rank's slice of the sequence (Gloo reduce-scatters as an all-reduce and a slice too).
at::Tensor scattered(const at::Tensor& x, int64_t group) {
  slice_width(x, group_at(group));  // the length check before the collective, the same on every rank
  return slice_of(summed_over(x, group), group);
}

struct GatherSequence : public torch::autograd::Function<GatherSequence> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, int64_t group) {
    ctx->saved_data["group"] = group;
    return gathered_along(x, kSequence, group);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {scattered(grads[0], ctx->saved_data["group"].toInt()), at::Tensor()};
  }
};

struct ScatterSequence : public torch::autograd::Function<ScatterSequence> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, int64_t group) {
    ctx->saved_data["group"] = group;
    return scattered(x, group);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {gathered_along(grads[0], kSequence, ctx->saved_data["group"].toInt()), at::Tensor()};
  }
};

// Megatron's scatter_to_sequence_parallel_region: forward a slice, backward a gather.
struct SplitSequence : public torch::autograd::Function<SplitSequence> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, int64_t group) {
    ctx->saved_data["group"] = group;
    return slice_of(x, group);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {gathered_along(grads[0], kSequence, ctx->saved_data["group"].toInt()), at::Tensor()};
  }
};

// Megatron's gather_from_sequence_parallel_region with tensor_parallel_output_grad=False: forward a gather, backward
// this rank's slice of a gradient every rank holds whole.
struct GatherWholeSequence : public torch::autograd::Function<GatherWholeSequence> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, int64_t group) {
    ctx->saved_data["group"] = group;
    return gathered_along(x, kSequence, group);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {slice_of(grads[0], ctx->saved_data["group"].toInt()), at::Tensor()};
  }
};

}  // namespace

bool sequence_split(bool enabled, bool training) { return enabled && training; }

at::Tensor gather_sequence(const at::Tensor& x, int64_t group) { return GatherSequence::apply(x, group); }
at::Tensor scatter_sequence(const at::Tensor& x, int64_t group) { return ScatterSequence::apply(x, group); }
at::Tensor split_sequence(const at::Tensor& x, int64_t group) { return SplitSequence::apply(x, group); }
at::Tensor gather_whole_sequence(const at::Tensor& x, int64_t group) { return GatherWholeSequence::apply(x, group); }

SequenceParallelLayer::SequenceParallelLayer(std::shared_ptr<nn::Layer> inner, const Group& group)
    : inner_(std::move(inner)), group_(register_group(group)) {
  adopt_members_of(*inner_);
  const int64_t id = group_;
  // Each rank's gradient covers its slice of the sequence: the whole sequence's is their sum. A backward follows a
  // forward that recorded gradients, which ran sequence-parallel.
  for (auto& p : inner_->parameters()) {
    if (!p.requires_grad()) continue;
    p.register_hook([id](const at::Tensor& grad) { return summed_over(grad, id); });
  }
}

at::Tensor SequenceParallelLayer::forward(const at::Tensor& x) {
  // Only a sequence-parallel forward runs on a slice (evaluation and generation pass the whole sequence).
  return sequence_split(true, is_training()) ? gather_sequence(inner_->forward(x), group_) : inner_->forward(x);
}

SequenceBoundaryLayer::SequenceBoundaryLayer(std::shared_ptr<nn::Layer> inner, const Group& group, bool start)
    : inner_(std::move(inner)), group_(register_group(group)), start_(start) {
  adopt_members_of(*inner_);
}

at::Tensor SequenceBoundaryLayer::forward(const at::Tensor& x) {
  if (!sequence_split(true, is_training())) return inner_->forward(x);
  return start_ ? split_sequence(inner_->forward(x), group_) : inner_->forward(gather_whole_sequence(x, group_));
}

}  // namespace composer::dist::detail
