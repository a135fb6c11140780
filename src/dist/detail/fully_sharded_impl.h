// The FSDP engine's private state, shared by fully_sharded.cpp (sharding, gathering, reducing) and
// fully_sharded_state.cpp (the optimizer and model state in checkpoint form).
#pragma once

#include "composer/dist/dist.h"
#include "composer/dist/fully_sharded.h"

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>
#include <c10/core/StorageImpl.h>

#include <functional>
#include <string>
#include <vector>

namespace composer::dist {

namespace detail {

// One flat buffer: a unit's trainable parameters of one optimizer group and dtype, laid end to end and padded to a
// multiple of the world size. `shard` (this rank's 1/N) is what the optimizer steps; `full`'s storage holds the
// gathered values only while the unit is gathered, and is released (not just dropped) afterwards, so that views of
// it the autograd graph saved in the forward see the values again once the backward regathers them.
struct FlatParam {
  std::vector<at::Tensor> params;
  std::vector<std::string> names;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<int64_t> offsets;
  int64_t numel = 0;
  int64_t shard_numel = 0;
  at::Tensor shard;
  at::Tensor full;
  bool gathered = false;
};

inline void allocate_storage(at::Tensor& full, int64_t numel, const at::TensorOptions& options) {
  if (!full.defined()) {
    full = at::empty({numel}, options);
    return;
  }
  c10::StorageImpl* storage = full.storage().unsafeGetStorageImpl();
  const size_t bytes = static_cast<size_t>(numel) * full.element_size();
  storage->set_data_ptr_noswap(storage->allocator()->allocate(bytes));
  storage->set_nbytes(bytes);
}

inline void release_storage(at::Tensor& full) {
  c10::StorageImpl* storage = full.storage().unsafeGetStorageImpl();
  storage->set_data_ptr_noswap(c10::DataPtr(nullptr, full.device()));
  storage->set_nbytes(0);
}

}  // namespace detail

using detail::FlatParam;

struct FullyShardedDataParallel::Impl {
  ShardingStrategy strategy = ShardingStrategy::FULL_SHARD;
  int64_t world = 1;
  int64_t rank = 0;
  std::vector<FlatParam> flats;
  std::vector<std::pair<std::string, at::Tensor>> trainable;  // named_parameters() order
  int64_t num_units = 0;
  // What each optimizer parameter (numbered across the groups, as the optimizer's state dict numbers them) is:
  // a flat's shard, or a parameter FSDP left whole (frozen) under its name.
  struct Slot {
    int64_t flat = -1;
    std::string name;
  };
  std::vector<std::vector<Slot>> slots;               // per group
  std::vector<std::vector<std::string>> group_names;  // per group: its parameters' names in the order given
  bool set_up = false;

  // A state dict of the optimizer over the shards (torch's indexed form) keyed by parameter name as one process
  // keys it: entries that are not shaped like the shard go to every parameter of the flat; `split` places the
  // ones that are (each parameter's dict is per[i]). fully_sharded_state.cpp.
  using SplitEntry = std::function<void(const FlatParam& f, const std::string& key, const at::Tensor& entry,
                                        std::vector<c10::impl::GenericDict>& per)>;
  c10::IValue by_parameter_name(const c10::IValue& sharded, const SplitEntry& split) const;

  bool sharded() const { return strategy != ShardingStrategy::NO_SHARD; }

  void point_params_at(FlatParam& f, const at::Tensor& values) {
    for (size_t i = 0; i < f.params.size(); ++i) {
      const int64_t n = c10::multiply_integers(f.shapes[i]);
      f.params[i].set_data(values.narrow(0, f.offsets[i], n).view(f.shapes[i]));
    }
  }

  void gather(FlatParam& f) {
    if (f.gathered) return;
    at::NoGradGuard no_grad;
    const std::vector<at::Tensor> parts = all_gather(f.shard.detach());
    detail::allocate_storage(f.full, f.shard_numel * world, f.shard.options().requires_grad(false));
    at::cat_out(f.full, parts);
    point_params_at(f, f.full);
    f.gathered = true;
  }

  void release(FlatParam& f) {
    if (!f.gathered || !sharded()) return;
    at::NoGradGuard no_grad;
    const at::Tensor empty = at::empty({0}, f.shard.options().requires_grad(false));
    for (auto& p : f.params) p.set_data(empty);
    if (f.full.defined()) detail::release_storage(f.full);  // undefined until the first gather
    f.gathered = false;
  }

  void gather_all() {
    for (auto& f : flats) gather(f);
  }
  void release_all() {
    for (auto& f : flats) release(f);
  }

  // The flat gradient, averaged over the ranks; this rank's part of it is added to the shard's gradient and the
  // parameters' own (full-size) gradients are freed.
  void reduce_gradients() {
    at::NoGradGuard no_grad;
    for (auto& f : flats) {
      at::Tensor flat = at::zeros({f.shard_numel * (sharded() ? world : 1)}, f.shard.options().requires_grad(false));
      for (size_t i = 0; i < f.params.size(); ++i) {
        at::Tensor& g = f.params[i].mutable_grad();
        if (!g.defined()) continue;
        flat.narrow(0, f.offsets[i], g.numel()).copy_(g.reshape(-1));
        g = at::Tensor();
      }
      all_reduce(flat);  // every rank joins, with zeros for the parameters it did not use
      if (world > 1) flat.div_(static_cast<double>(world));
      at::Tensor mine = sharded() ? flat.narrow(0, rank * f.shard_numel, f.shard_numel) : flat;
      at::Tensor& shard_grad = f.shard.mutable_grad();
      if (shard_grad.defined())
        shard_grad.add_(mine);
      else
        shard_grad = mine.clone();
    }
  }
};

}  // namespace composer::dist
