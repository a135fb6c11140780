#include "dist/detail/vocabulary_parallel.h"

#include "composer/dist/collective_check.h"
#include "dist/detail/parallel_linear.h"
#include "dist/detail/sequence_parallel.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

namespace composer::dist::detail {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

void reduce(at::Tensor& t, ReduceOp op, int64_t group) {
  check_before_collective();  // automatic microbatching's agreement, as before FSDP's collectives
  all_reduce(t, op, group_at(group));
}

// Megatron's vocabulary-parallel cross entropy: the row maxima, the sums of exponentials and the target's logit
// (held by one rank) all-reduced over the group; log(sum) - target per token.
struct SplitCrossEntropy : public torch::autograd::Function<SplitCrossEntropy> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& logits, const at::Tensor& labels, int64_t begin,
                            int64_t ignore_index, bool mean, int64_t group) {
    const at::Tensor flat = logits.reshape({-1, logits.size(-1)});
    const at::Tensor target = labels.reshape({-1});
    at::Tensor peak = flat.amax(-1);
    reduce(peak, ReduceOp::MAX, group);
    const at::Tensor shifted = flat - peak.unsqueeze(-1);
    const at::Tensor exps = shifted.exp();
    at::Tensor total = exps.sum(-1);
    reduce(total, ReduceOp::SUM, group);
    const at::Tensor counted = target.ne(ignore_index);
    const at::Tensor local = target - begin;
    const at::Tensor here = local.ge(0).logical_and(local.lt(flat.size(-1))).logical_and(counted);
    const at::Tensor column = local.masked_fill(here.logical_not(), 0);
    at::Tensor picked = shifted.gather(1, column.unsqueeze(1)).squeeze(1).masked_fill(here.logical_not(), 0);
    reduce(picked, ReduceOp::SUM, group);
    const at::Tensor per_token = (total.log() - picked).masked_fill(counted.logical_not(), 0);
    const at::Tensor tokens = counted.sum().to(flat.scalar_type());
    ctx->save_for_backward({exps / total.unsqueeze(-1), column, here, counted, tokens});
    ctx->saved_data["mean"] = mean;
    ctx->saved_data["shape"] = logits.sizes().vec();
    return mean ? per_token.sum() / tokens : per_token.sum();
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    at::Tensor grad = saved[0].clone();  // softmax - one-hot(target), on this rank's slice
    grad.scatter_add_(1, saved[1].unsqueeze(1), saved[2].to(grad.scalar_type()).neg().unsqueeze(1));
    grad.mul_(saved[3].to(grad.scalar_type()).unsqueeze(1));
    const at::Tensor scale = ctx->saved_data["mean"].toBool() ? grads[0] / saved[4] : grads[0];
    grad.mul_(scale);
    return {grad.view(ctx->saved_data["shape"].toIntVector()),
            at::Tensor(),
            at::Tensor(),
            at::Tensor(),
            at::Tensor(),
            at::Tensor()};
  }
};

}  // namespace

at::Tensor split_cross_entropy(const at::Tensor& logits, const at::Tensor& labels, int64_t begin, int64_t ignore_index,
                               bool mean, int64_t group) {
  return SplitCrossEntropy::apply(logits, labels, begin, ignore_index, mean, group);
}

VocabularySlice::VocabularySlice(const Group& group, int64_t rows, bool loss_parallel, bool sequence_parallel)
    : group_(register_group(group)),
      rows_(rows),
      size_(group.size()),
      begin_(group.rank() * rows),
      loss_parallel_(loss_parallel),
      sequence_parallel_(sequence_parallel) {}

at::Tensor VocabularySlice::whole_logits(const at::Tensor& split) {
  at::NoGradGuard no_grad;
  return gathered_along(split, -1, group_);
}

at::Tensor VocabularySlice::cross_entropy(const at::Tensor& split, const at::Tensor& labels, int64_t ignore_index,
                                          bool mean) {
  return split_cross_entropy(split, labels, begin_, ignore_index, mean, group_);
}

at::Tensor VocabularySlice::head_input(const at::Tensor& hidden, bool training) {
  return sequence_split(sequence_parallel_, training) ? hidden : copy_to_group(hidden, group_);
}

at::Tensor VocabularySlice::head_output(const at::Tensor& slice) {
  if (loss_parallel_ && at::GradMode::is_enabled()) return slice;
  return gather_from_group(slice, group_);
}

ParallelEmbedding::ParallelEmbedding(const nn::Embedding& inner, const Group& group, bool loss_parallel,
                                     bool sequence_parallel)
    : VocabularySlice(group, inner.weight.size(0), loss_parallel, sequence_parallel), weight_(inner.weight) {
  adopt_members_of(inner);
}

at::Tensor ParallelEmbedding::forward(const at::Tensor& ids) {
  if (whole(weight_)) return at::embedding(weight_, ids);
  const at::Tensor local = ids - begin_;
  const at::Tensor elsewhere = local.lt(0).logical_or(local.ge(rows_));
  const at::Tensor rows = at::embedding(weight_, local.masked_fill(elsewhere, 0));
  const at::Tensor mine = rows.masked_fill(elsewhere.unsqueeze(-1), 0);
  return sequence_split(sequence_parallel_, is_training()) ? scatter_sequence(mine, group_)
                                                           : reduce_from_group(mine, group_);
}

at::Tensor ParallelEmbedding::tied_logits(const at::Tensor& hidden) {
  if (whole(weight_)) return at::linear(hidden, weight_);
  return head_output(at::linear(head_input(hidden, is_training()), weight_));
}

ParallelHead::ParallelHead(const nn::Linear& inner, const Group& group, bool loss_parallel, bool sequence_parallel)
    : VocabularySlice(group, inner.weight.size(0), loss_parallel, sequence_parallel),
      weight_(inner.weight),
      bias_(inner.bias) {
  adopt_members_of(inner);
}

at::Tensor ParallelHead::forward(const at::Tensor& hidden) {
  if (whole(weight_)) return at::linear(hidden, weight_, bias_);
  return head_output(at::linear(head_input(hidden, is_training()), weight_, bias_));
}

}  // namespace composer::dist::detail
