// FSDP with tensor parallelism: the degree, the split applied before the sharding, and the split parameters made
// whole (gathered over the tensor-parallel group) where one process's form of the state is asked for: full
// checkpoints, gathered weights, the optimizer's state, the clipping norm and per-parameter sums.
#include "composer/dist/fully_sharded.h"

#include "composer/dist/dist.h"
#include "dist/detail/fully_sharded_impl.h"

#include <ATen/ATen.h>

#include <functional>
#include <map>
#include <stdexcept>

namespace composer::dist {

using GenericDict = c10::impl::GenericDict;

int64_t FullyShardedDataParallel::Impl::tp_degree(const FSDPOptions& o, const std::optional<TPOptions>& tp,
                                                  int64_t world_size) {
  if (!tp) return 1;
  int64_t degree = tp->tensor_parallel_degree();
  if (degree == -1) {  // Composer: one -1 in the mesh fills what the others leave
    const int64_t shard = o.data_parallel_shard_degree();
    const int64_t replicate = o.data_parallel_replicate_degree().value_or(1);
    if (shard == -1 || replicate == -1) {
      throw std::invalid_argument(
          "parallelism_config: tp.tensor_parallel_degree and an fsdp data-parallel degree are both -1; only one "
          "may fill what the world size leaves");
    }
    degree = world_size / (shard * replicate);
  }
  if (degree < 1 || world_size % degree != 0) {
    throw std::invalid_argument("parallelism_config.tp.tensor_parallel_degree " + std::to_string(degree) +
                                " does not divide the world size " + std::to_string(world_size));
  }
  return degree;
}

void FullyShardedDataParallel::Impl::split_for_tensor_parallel(torch::nn::Module& model) {
  splits = parallelize(model, tp_group, *tp_options);
  for (size_t k = 0; k < splits.size(); ++k) {
    split_index[splits[k].parameter.unsafeGetTensorImpl()] = k;
    split_shapes.push_back(splits[k].parameter.sizes().vec());
  }
}

void FullyShardedDataParallel::Impl::tp_make_whole() {
  if (!tp_locals.empty()) return;
  at::NoGradGuard no_grad;
  for (auto& s : splits) {
    const at::Tensor local = s.parameter.detach();
    s.parameter.set_data(s.split.whole_of(all_gather(local.contiguous(), tp_group)));
    tp_locals.push_back(local);
  }
}

void FullyShardedDataParallel::Impl::tp_restore_local(bool keep) {
  if (tp_locals.empty()) return;
  at::NoGradGuard no_grad;
  for (size_t k = 0; k < splits.size(); ++k) {
    if (keep) tp_locals[k].copy_(splits[k].split.local_of(splits[k].parameter.detach()));
    splits[k].parameter.set_data(tp_locals[k]);
  }
  tp_locals.clear();
}

namespace {

// `named` (torch's form, state keyed by parameter name) with each split parameter's entries shaped like `from`
// (the part, or the whole) turned by `turn`.
c10::IValue turn_entries(const c10::IValue& named, const std::vector<SplitParameter>& splits,
                         const std::vector<std::vector<int64_t>>& shapes,
                         const std::function<at::Tensor(const SplitParameter&, const at::Tensor&)>& turn) {
  GenericDict d = named.toGenericDict().copy();
  GenericDict state = d.at("state").toGenericDict().copy();
  for (size_t k = 0; k < splits.size(); ++k) {
    const SplitParameter& s = splits[k];
    const auto it = state.find(s.name);
    if (it == state.end()) continue;
    GenericDict entries = it->value().toGenericDict().copy();
    const std::vector<int64_t>& shape = shapes[k];
    for (const auto& e : entries) {  // insertion order: the same on every rank of the group
      if (e.value().isTensor() && e.value().toTensor().sizes().vec() == shape)
        entries.insert_or_assign(e.key(), turn(s, e.value().toTensor()));
    }
    state.insert_or_assign(s.name, entries);
  }
  d.insert_or_assign("state", state);
  return d;
}

}  // namespace

c10::IValue FullyShardedDataParallel::Impl::tp_whole_entries(const c10::IValue& named) const {
  if (splits.empty()) return named;
  at::NoGradGuard no_grad;
  const Group& group = tp_group;
  return turn_entries(named, splits, split_shapes, [&group](const SplitParameter& s, const at::Tensor& part) {
    return s.split.whole_of(all_gather(part.contiguous(), group));
  });
}

c10::IValue FullyShardedDataParallel::Impl::tp_local_entries(const c10::IValue& named) const {
  if (splits.empty() || !named.isGenericDict() || !named.toGenericDict().contains("state")) return named;
  at::NoGradGuard no_grad;
  std::vector<std::vector<int64_t>> whole = split_shapes;
  for (size_t k = 0; k < splits.size(); ++k)
    whole[k][static_cast<size_t>(splits[k].split.dim)] *= splits[k].split.degree;
  return turn_entries(named, splits, whole,
                      [](const SplitParameter& s, const at::Tensor& whole) { return s.split.local_of(whole); });
}

void FullyShardedDataParallel::Impl::tp_whole_tensors(std::vector<std::pair<std::string, at::Tensor>>& named) const {
  if (splits.empty()) return;
  std::map<std::string, const SplitParameter*> by_name;
  for (const auto& s : splits) by_name[s.name] = &s;
  at::NoGradGuard no_grad;
  for (auto& [name, t] : named)  // the same names in the same order on every rank of the group
    if (const auto it = by_name.find(name); it != by_name.end())
      t = it->second->split.whole_of(all_gather(t.contiguous(), tp_group));
}

double FullyShardedDataParallel::Impl::tp_total(double replicated, double split, bool max) const {
  // The replicated parameters' gradients are the same on every rank of the group: counted on its first rank only.
  at::Tensor t =
      at::full({1}, max ? std::max(replicated, split) : (tp_rank == 0 ? replicated : 0.0) + split, at::kDouble);
  all_reduce(t, max ? ReduceOp::MAX : ReduceOp::SUM, tp_group);
  return t.item<double>();
}

}  // namespace composer::dist
