// The FSDP engine's private state, shared by fully_sharded_setup.cpp (the sharding), fully_sharded.cpp (gathering,
// reducing), fully_sharded_units.cpp (the units gathered around their own forward and backward) and
// fully_sharded_state.cpp (the optimizer and model state in checkpoint form).
#pragma once

#include "composer/dist/collective_check.h"
#include "composer/dist/dist.h"
#include "composer/dist/fully_sharded.h"
#include "composer/dist/tensor_parallel.h"

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>
#include <c10/core/StorageImpl.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace composer::dist {

namespace detail {

// One flat buffer: a unit's parameters of one optimizer group and dtype, trainable or frozen (requires_grad false:
// gathered for the passes like the others, never given a gradient nor reduced), laid end to end and padded to a
// multiple of the world size. `shard` (this rank's 1/N) is what the optimizer steps; `full`'s storage holds the
// gathered values only while the unit is gathered, and is released (not just dropped) afterwards, so that views of
// it the autograd graph saved in the forward see the values again once the backward regathers them.
struct FlatParam {
  std::vector<at::Tensor> params;
  std::vector<std::string> names;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<int64_t> offsets;
  std::vector<std::optional<TensorParallelSplit>> pieces;  // a tensor-parallel split parameter's place in the whole
  int64_t numel = 0;
  int64_t shard_numel = 0;
  bool frozen = false;  // its parameters need no gradient
  at::Tensor shard;
  at::Tensor full;        // gathered for computing, in compute_dtype
  at::Tensor full_state;  // gathered in the shard's own dtype (gather_full_precision), when compute_dtype differs
  at::ScalarType compute_dtype = at::kFloat;  // mixed_precision's param_dtype, or the shard's dtype
  at::ScalarType reduce_dtype = at::kFloat;   // the gradient reduction's
  bool gathered = false;
  bool started = false;         // an all-gather started (a prefetch) and not yet waited for
  bool in_full_state = false;   // the gather in flight or done is into full_state
  int64_t gathered_nbytes = 0;  // of that gather
  at::Tensor gather_input;      // the (cast) shard being gathered, kept until the collective is done
  Handle gathering;
  int64_t unit = 0;
};

// The elements [begin, end) of parameter `i` of `f` that this rank's shard holds, in the parameter's row-major
// order (all zero when it holds none), and where in the shard they start.
struct Held {
  int64_t begin = 0, end = 0, in_shard = 0;
  int64_t size() const { return end - begin; }
};
inline Held held_range(const FlatParam& f, size_t i, bool sharded, int64_t rank) {
  const int64_t n = c10::multiply_integers(f.shapes[i]);
  const int64_t mine_begin = sharded ? rank * f.shard_numel : 0;
  const int64_t lo = std::max(mine_begin, f.offsets[i]), hi = std::min(mine_begin + f.shard_numel, f.offsets[i] + n);
  if (lo >= hi) return {};
  return {lo - f.offsets[i], hi - f.offsets[i], lo - mine_begin};
}

// A floating buffer cast to mixed_precision's buffer_dtype for the forward passes: `own` aliases its own values.
struct CastBuffer {
  at::Tensor buffer;
  at::Tensor own;
};

// A sharding unit: its flat buffers, and where its backward stands.
struct Unit {
  std::string name;  // "" for the root
  std::vector<int64_t> flats;
  bool per_unit = false;    // gathered around its own forward and backward (a ShardedUnitLayer)
  int64_t params = 0;       // its trainable parameters: the gradient hooks one backward fires (0: a frozen unit)
  bool has_frozen = false;  // frozen flats, freed in the backward once its input's gradient is computed
  int64_t waiting = 0;      // hooks not fired yet in this backward
  bool reduced = false;     // its gradient reduction started in this step's last backward
};

// A gradient reduction in flight: `out` becomes the flat's gradient slice once `handle` is waited for.
struct Reduction {
  int64_t flat = 0;
  at::Tensor out;
  at::Tensor in;  // kept alive until the collective is done
  Handle handle;
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

using detail::CastBuffer;
using detail::FlatParam;
using detail::Reduction;
using detail::Unit;

struct FullyShardedDataParallel::Impl {
  // What the layers and gradient hooks FSDP puts into the model call back into; nulled when the engine goes, so
  // that a model outliving its strategy still runs (its layers then just call the wrapped ones).
  std::shared_ptr<Impl*> self = std::make_shared<Impl*>(this);
  class UnitLayer;
  class GradientHook;
  ~Impl() { *self = nullptr; }

  ShardingStrategy strategy = ShardingStrategy::FULL_SHARD;
  // The shard group: `world` ranks (all of them, or data_parallel_shard_degree under HYBRID_SHARD), this one its
  // `rank`-th. `replicas` such groups hold the same shards (HYBRID_SHARD); their gradients are all-reduced across
  // `replica_group`. `reports`: this rank's parts go into sharded checkpoints (the first replica's; rank 0's when
  // unsharded).
  int64_t world = 1;
  int64_t rank = 0;
  int64_t replicas = 1;
  bool reports = true;
  Group shard_group;  // the world unless HYBRID_SHARD
  Group replica_group;
  // Tensor parallelism (dist/tensor_parallel.h): `tp` consecutive ranks, this one their `tp_rank`-th, split the
  // layers the plan names (`splits`); FSDP's groups then span the data-parallel ranks, those at the same place in
  // each tensor-parallel group (`dp_group`, the world without tensor parallelism). fully_sharded_tp.cpp.
  std::optional<TPOptions> tp_options;
  int64_t tp = 1;
  int64_t tp_rank = 0;
  Group tp_group;
  Group dp_group;
  std::vector<SplitParameter> splits;
  std::map<const c10::TensorImpl*, size_t> split_index;  // each split parameter's place in `splits`
  std::vector<std::vector<int64_t>> split_shapes;        // each split parameter's part's shape
  std::vector<at::Tensor> tp_locals;  // the split parameters' own parts while they hold whole tensors
  // The split parameters made whole (gathered over the tensor-parallel group) inside gather_full_precision(), and
  // back to their parts (`keep`: the parts take the whole tensors' values, as loaded).
  // The degree: tensor_parallel_degree (its -1 what the world and the data-parallel degrees leave), 1 without tp.
  static int64_t tp_degree(const FSDPOptions& o, const std::optional<TPOptions>& tp, int64_t world_size);
  // Applies the plan (the model's own when none is given) over tp_group, before the sharding.
  void split_for_tensor_parallel(torch::nn::Module& model);
  void tp_make_whole();
  void tp_restore_local(bool keep);
  // A name-keyed optimizer state dict with the split parameters' entries whole (a collective over the group), or
  // with the entries of a whole one cut to this rank's parts.
  c10::IValue tp_whole_entries(const c10::IValue& named) const;
  c10::IValue tp_local_entries(const c10::IValue& named) const;
  // Named tensors of this rank's parts made whole (a collective over the group).
  void tp_whole_tensors(std::vector<std::pair<std::string, at::Tensor>>& named) const;
  // The clipping norm's sum (or max) over the model: `split` from the split parameters' elements, `replicated` from
  // the others, each already over the shard group.
  double tp_total(double replicated, double split, bool max) const;
  BackwardPrefetch backward_prefetch = BackwardPrefetch::BACKWARD_POST;
  bool forward_prefetch = false;
  MixedPrecisionDtypes mixed_precision;
  bool low_precision_params = false;  // some flat computes in another dtype than its shard's: gathered even unsharded
  bool full_precision = false;        // inside gather_full_precision()
  std::vector<CastBuffer> cast_buffers;
  bool buffers_cast = false;
  std::vector<FlatParam> flats;
  std::vector<Unit> units;                                     // the root (everything no other unit claims) last
  std::vector<std::pair<std::string, at::Tensor>> parameters;  // named_parameters() order
  int64_t num_units = 0;
  // The training passes: per-unit gathering happens only inside them (evaluation and checkpoints gather the whole
  // model through enter()).
  bool training_forward = false;
  bool in_backward = false;
  bool sync = true;                   // this backward's gradients are reduced (the step's last microbatch)
  std::vector<int64_t> order;         // per-unit units in the order their forward ran in this training forward
  std::vector<int64_t> last_order;    // ... in the previous one (forward_prefetch's guide)
  std::vector<Reduction> reductions;  // in flight
  // torch FSDP's averaging: divided by `predivide` before the reduction and by `postdivide` after (world =
  // predivide * postdivide), so that low-precision sums do not overflow.
  double predivide = 1;
  double postdivide = 1;
  int64_t gathered_bytes = 0;
  int64_t peak_training_gathered_bytes = 0;
  // What each optimizer parameter (numbered across the groups, as the optimizer's state dict numbers them) is:
  // a flat's shard, or a parameter FSDP left whole (frozen) under its name.
  struct Slot {
    int64_t flat = -1;
    std::string name;
  };
  std::vector<std::vector<Slot>> slots;               // per group
  std::vector<std::vector<std::string>> group_names;  // per group: its parameters' names in the order given
  bool set_up = false;
  // activation_checkpointing's modules (unset: none), wrapped at setup()
  WrapPolicy checkpointing_policy;

  // A state dict of the optimizer over the shards (torch's indexed form) keyed by parameter name as one process
  // keys it: entries that are not shaped like the shard go to every parameter of the flat; `split` places the
  // ones that are (each parameter's dict is per[i]). fully_sharded_state.cpp.
  using SplitEntry = std::function<void(const FlatParam& f, const std::string& key, const at::Tensor& entry,
                                        std::vector<c10::impl::GenericDict>& per)>;
  c10::IValue by_parameter_name(const c10::IValue& sharded, const SplitEntry& split) const;

  bool sharded() const { return strategy != ShardingStrategy::NO_SHARD; }
  // Whether this rank writes its part of parameter i of f into a sharded checkpoint: the reporting replica's, and of
  // a parameter tensor parallelism left whole, the tensor-parallel group's first rank's only.
  bool reports_part(const FlatParam& f, size_t i) const { return reports && (f.pieces[i] || tp_rank == 0); }
  // FULL_SHARD and HYBRID_SHARD free the gathered weights after the forward; the ZeRO-2 kinds keep them.
  bool frees_after_forward() const {
    return strategy == ShardingStrategy::FULL_SHARD || strategy == ShardingStrategy::HYBRID_SHARD;
  }
  // Whether the parameters are gathered into buffers of their own for computing (and empty otherwise); unsharded
  // without mixed precision they are views of the shards throughout.
  bool gathers() const { return sharded() || low_precision_params; }

  void point_params_at(FlatParam& f, const at::Tensor& values) {
    for (size_t i = 0; i < f.params.size(); ++i) {
      const int64_t n = c10::multiply_integers(f.shapes[i]);
      f.params[i].set_data(values.narrow(0, f.offsets[i], n).view(f.shapes[i]));
    }
  }

  // Starts all-gathering f's shards (cast to its compute dtype, or in their own under gather_full_precision) into
  // its full buffer (a prefetch); gather() finishes it. Unsharded, the "gather" is the cast copy.
  void start_gather(FlatParam& f) {
    if (f.gathered || f.started) return;
    at::NoGradGuard no_grad;
    f.in_full_state = full_precision && f.compute_dtype != f.shard.scalar_type();
    at::Tensor& buffer = f.in_full_state ? f.full_state : f.full;
    const at::ScalarType dtype = full_precision ? f.shard.scalar_type() : f.compute_dtype;
    detail::allocate_storage(buffer, f.shard_numel * (sharded() ? world : 1),
                             f.shard.options().dtype(dtype).requires_grad(false));
    f.gather_input = f.shard.detach().to(dtype);
    if (sharded() && collective_check_active()) {  // automatic microbatching: after the allocations, before the gather
      // Gloo's all-gather copies through a flat tensor of the output's size that it allocates inside the collective,
      // where running out of memory would leave the other ranks waiting: that much (twice, for slack) is allocated
      // and freed first, so that a rank short of it runs out here, before the check.
      if (buffer.is_cpu()) (void)at::empty({2 * buffer.numel()}, buffer.options());
      check_before_collective();
    }
    f.gathered_nbytes = buffer.numel() * static_cast<int64_t>(buffer.element_size());
    gathered_bytes += f.gathered_nbytes;
    if (training_forward || in_backward)
      peak_training_gathered_bytes = std::max(peak_training_gathered_bytes, gathered_bytes);
    if (sharded()) {
      f.gathering = all_gather_into_async(buffer, f.gather_input, shard_group);
    } else {
      buffer.copy_(f.gather_input);
      f.gathering = Handle();
    }
    f.started = true;
  }

  void gather(FlatParam& f) {
    if (f.gathered) return;
    start_gather(f);
    f.gathering.wait();
    f.started = false;
    f.gather_input = at::Tensor();
    point_params_at(f, f.in_full_state ? f.full_state : f.full);
    f.gathered = true;
  }

  void release(FlatParam& f) {
    if (!gathers()) return;
    if (f.started) {  // a prefetch nobody used: its buffer is written until it completes
      f.gathering.wait();
      f.started = false;
      f.gather_input = at::Tensor();
      f.gathered = true;
    }
    if (!f.gathered) return;
    at::NoGradGuard no_grad;
    const at::Tensor empty = at::empty({0}, f.shard.options().requires_grad(false));
    for (auto& p : f.params) p.set_data(empty);
    at::Tensor& buffer = f.in_full_state ? f.full_state : f.full;
    if (buffer.defined()) detail::release_storage(buffer);  // undefined until the first gather
    gathered_bytes -= f.gathered_nbytes;
    f.gathered_nbytes = 0;
    f.in_full_state = false;
    f.gathered = false;
  }

  // mixed_precision's buffer_dtype for a forward pass, and back (the values the pass wrote kept, as torch FSDP,
  // which keeps the buffers in buffer_dtype, would have them).
  void cast_buffers_for_forward() {
    if (buffers_cast || cast_buffers.empty() || !mixed_precision.buffer_dtype) return;
    at::NoGradGuard no_grad;
    for (auto& b : cast_buffers) b.buffer.set_data(b.own.to(*mixed_precision.buffer_dtype));
    buffers_cast = true;
  }
  void restore_buffers() {
    if (!buffers_cast) return;
    at::NoGradGuard no_grad;
    for (auto& b : cast_buffers) {
      b.own.copy_(b.buffer.detach());
      b.buffer.set_data(b.own);
    }
    buffers_cast = false;
  }

  void gather_unit(int64_t u) {
    for (const int64_t k : units[static_cast<size_t>(u)].flats) start_gather(flats[static_cast<size_t>(k)]);
    for (const int64_t k : units[static_cast<size_t>(u)].flats) gather(flats[static_cast<size_t>(k)]);
  }
  void prefetch_unit(int64_t u) {
    for (const int64_t k : units[static_cast<size_t>(u)].flats) start_gather(flats[static_cast<size_t>(k)]);
  }
  void release_unit(int64_t u) {
    for (const int64_t k : units[static_cast<size_t>(u)].flats) release(flats[static_cast<size_t>(k)]);
  }
  // Unit u's trainable flats, or its frozen ones.
  void release_unit_part(int64_t u, bool frozen) {
    for (const int64_t k : units[static_cast<size_t>(u)].flats)
      if (flats[static_cast<size_t>(k)].frozen == frozen) release(flats[static_cast<size_t>(k)]);
  }
  // The units the enter() scopes gather: every unit not gathered around its own passes (the root among them).
  void gather_whole_units() {
    for (size_t u = 0; u < units.size(); ++u)
      if (!units[u].per_unit) gather_unit(static_cast<int64_t>(u));
  }

  void gather_all() {
    for (auto& f : flats) gather(f);
  }
  // After a pass ended by an exception (automatic microbatching retries it): every flat released (the gathers in
  // flight waited for: every rank started them), the reductions in flight finished and their gradients dropped, and
  // no forward order to prefetch from, so that every rank starts the next pass from the same state.
  void abort_pass() {
    release_all();
    for (auto& r : reductions) r.handle.wait();
    reductions.clear();
    for (auto& unit : units) unit.reduced = false;
    last_order.clear();
  }
  void release_all() {
    for (auto& f : flats) release(f);
  }

  // Starts reducing unit u's gradients: its parameters' (full-size) gradients are laid into one flat buffer per flat
  // (zeros for the parameters without one) and freed; the reduce-scatter (an all-reduce when not sharded) runs in
  // the background until finish_reductions(). Every rank reduces every unit, in the same order.
  void start_reduction(int64_t u) {
    at::NoGradGuard no_grad;
    const size_t earlier = reductions.size();
    for (const int64_t k : units[static_cast<size_t>(u)].flats) {
      FlatParam& f = flats[static_cast<size_t>(k)];
      if (f.frozen) continue;
      Reduction r;
      r.flat = k;
      r.in = at::empty({f.shard_numel * (sharded() ? world : 1)},
                       f.shard.options().dtype(f.reduce_dtype).requires_grad(false));
      for (size_t i = 0; i < f.params.size(); ++i) {
        at::Tensor& g = f.params[i].mutable_grad();
        at::Tensor slot = r.in.narrow(0, f.offsets[i], c10::multiply_integers(f.shapes[i]));
        if (!g.defined()) {
          slot.zero_();
          continue;
        }
        slot.copy_(g.reshape(-1));
        g = at::Tensor();
      }
      r.in.narrow(0, f.numel, r.in.numel() - f.numel).zero_();  // the padding
      if (predivide > 1) r.in.div_(predivide);
      check_before_collective();
      if (sharded()) {
        r.out = at::empty({f.shard_numel}, r.in.options());
        r.handle = reduce_scatter_async(r.out, r.in, shard_group);
      } else {
        r.out = r.in;
        r.handle = all_reduce_async(r.out, dp_group);
      }
      reductions.push_back(std::move(r));
    }
    units[static_cast<size_t>(u)].reduced = true;
    // At most this unit's reductions stay in flight (with the next unit's backward), so that the full-size gradient
    // buffers of at most two units exist at once.
    finish_reductions(reductions.size() - earlier);
  }

  // Waits for the reductions in flight but the last `keep` and adds each rank's averaged slice to its shard's
  // gradient.
  void finish_reductions(size_t keep = 0) {
    at::NoGradGuard no_grad;
    const size_t done = reductions.size() - std::min(keep, reductions.size());
    for (size_t i = 0; i < done; ++i) {
      Reduction& r = reductions[i];
      r.handle.wait();
      if (sharded() && replicas > 1) {  // HYBRID_SHARD, as torch's
        check_before_collective();
        all_reduce(r.out, ReduceOp::SUM, replica_group);
      }
      if (postdivide > 1) r.out.div_(postdivide);
      const FlatParam& f = flats[static_cast<size_t>(r.flat)];
      at::Tensor& shard_grad = f.shard.mutable_grad();
      if (shard_grad.defined())
        shard_grad.add_(r.out);
      else
        shard_grad = r.out.to(f.shard.scalar_type());
    }
    reductions.erase(reductions.begin(), reductions.begin() + static_cast<std::ptrdiff_t>(done));
  }

  // The gradients averaged over the ranks, each rank keeping its slice: the units whose reduction has not started
  // during the backward start now, then every reduction is finished.
  void reduce_gradients() {
    for (size_t u = 0; u < units.size(); ++u)
      if (!units[u].reduced) start_reduction(static_cast<int64_t>(u));
    finish_reductions();
    for (auto& unit : units) unit.reduced = false;
  }

  // Per-unit scheduling (fully_sharded_units.cpp).
  void unit_pre_forward(int64_t u);
  void unit_post_forward(int64_t u, const at::Tensor& input, const at::Tensor& output);
  void unit_pre_backward(int64_t u);
  void unit_gradient_accumulated(int64_t u);
  void begin_backward(bool reduce);
  // Wraps every unit that is a composer::nn::Layer called through a composer::nn::Composite in a ShardedUnitLayer
  // and hooks its parameters' gradients; returns how many.
  int64_t wrap_units(torch::nn::Module& model, const std::vector<torch::nn::Module*>& modules);

  // The phases of setup() (fully_sharded_setup.cpp).
  void configure_mesh(const FSDPOptions& options);
  void shard_flat(detail::FlatParam& f);
  void rewire_optimizer(std::vector<torch::optim::OptimizerParamGroup>& groups,
                        const std::vector<std::vector<int64_t>>& group_flats,
                        const std::set<const c10::TensorImpl*>& claimed,
                        const std::map<const c10::TensorImpl*, std::string>& name_of);
  void finish_setup(torch::nn::Module& model, const std::vector<torch::nn::Module*>& unit_modules);
};

}  // namespace composer::dist
