#include "composer/dist/fully_sharded.h"

#include "composer/dist/dist.h"
#include "composer/dist/gradient_reducer.h"
#include "composer/nn/checkpoint.h"
#include "dist/detail/fully_sharded_impl.h"

#include <ATen/ATen.h>
#include <c10/core/StorageImpl.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <cmath>
#include <exception>
#include <iostream>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>

namespace composer::dist {

namespace {

class GatherScope final : public PhaseScope {
 public:
  explicit GatherScope(std::function<void()> on_exit) : on_exit_(std::move(on_exit)) {}
  // Leaving a phase waits for the gathers still in flight; after a peer died they fail, possibly while that very
  // error unwinds. A destructor must not throw (std::terminate), so the failure is dropped: the error unwinding, or
  // the next collective's, names it.
  ~GatherScope() override {
    try {
      if (on_exit_) on_exit_();
    } catch (const std::exception&) {
    }
  }

 private:
  std::function<void()> on_exit_;
};

}  // namespace

namespace {

// The options as the strategy sees the model: with activation checkpointing the units are found inside their
// checkpoint wrappers (the wrap policy judges the wrapped module), so they stay those of the unwrapped model.
FSDPOptions seeing_through_checkpoint_wrappers(FSDPOptions options) {
  if (!options.activation_checkpointing()) return options;
  const WrapPolicy units = options.wrap_policy() ? options.wrap_policy() : WrapPolicy(default_wrap_policy);
  return options.wrap_policy([units](const std::string& name, const torch::nn::Module& module) {
    const auto* wrapper = dynamic_cast<const nn::CheckpointedLayer*>(&module);
    return units(name, wrapper ? wrapper->inner() : module);
  });
}

// The modules activation_checkpointing wraps: its policy, else the sharding units (those of the unwrapped model);
// unset without activation checkpointing.
WrapPolicy checkpointing_policy(const FSDPOptions& options) {
  if (!options.activation_checkpointing()) return {};
  if (options.activation_checkpointing_policy()) return options.activation_checkpointing_policy();
  return options.wrap_policy() ? options.wrap_policy() : WrapPolicy(default_wrap_policy);
}

}  // namespace

FullyShardedDataParallel::FullyShardedDataParallel(FSDPOptions options, at::ScalarType precision_dtype,
                                                   std::optional<TPOptions> tp)
    : options_(seeing_through_checkpoint_wrappers(options)), impl_(std::make_unique<Impl>()) {
  impl_->tp_options = std::move(tp);
  impl_->checkpointing_policy = checkpointing_policy(options);
  impl_->mixed_precision = resolve_mixed_precision(options_.mixed_precision(), precision_dtype);
  impl_->strategy = options_.sharding_strategy();
  impl_->backward_prefetch = options_.backward_prefetch();
  impl_->forward_prefetch = options_.forward_prefetch();
}

FullyShardedDataParallel::~FullyShardedDataParallel() = default;

int64_t FullyShardedDataParallel::num_replicas() const { return get_world_size(); }

int64_t FullyShardedDataParallel::tensor_parallel_degree() const {
  return impl_->set_up ? impl_->tp : Impl::tp_degree(options_, impl_->tp_options, get_world_size());
}

int64_t FullyShardedDataParallel::data_parallel_size() const { return get_world_size() / tensor_parallel_degree(); }

int64_t FullyShardedDataParallel::data_parallel_rank() const { return get_global_rank() / tensor_parallel_degree(); }

ShardingStrategy FullyShardedDataParallel::effective_strategy() const { return impl_->strategy; }

DataParallelMesh FullyShardedDataParallel::mesh() const {
  DataParallelMesh mesh;
  mesh.replicate = impl_->set_up ? impl_->replicas : 1;
  mesh.shard = impl_->set_up ? impl_->world : get_world_size();
  return mesh;
}

double FullyShardedDataParallel::mean_batch_samples(double local_samples) { return mean_over_ranks(local_samples); }

void FullyShardedDataParallel::zero_grad() {
  for (auto& f : impl_->flats)
    for (auto& p : f.params) p.mutable_grad() = at::Tensor();
}

void FullyShardedDataParallel::before_backward(bool sync) { impl_->sync = sync; }

void FullyShardedDataParallel::after_backward(bool sync) {
  if (sync) impl_->reduce_gradients();
}

void FullyShardedDataParallel::sync_gradients() { impl_->reduce_gradients(); }

BatchTotals FullyShardedDataParallel::reduce_batch(BatchTotals local) {
  BatchTotals totals = reduce_over_ranks(std::move(local));  // losses averaged over every rank: each group's the same
  totals.samples /= impl_->tp;                               // a tensor-parallel group's ranks saw the same samples
  totals.tokens /= impl_->tp;
  return totals;
}

void FullyShardedDataParallel::sum_metric_state(at::Tensor& state) {
  all_reduce(state, ReduceOp::SUM, impl_->dp_group);
}

at::Tensor FullyShardedDataParallel::gather_metric_rows(const at::Tensor& rows) {
  return all_gather_rows(rows, impl_->dp_group);
}

std::unique_ptr<PhaseScope> FullyShardedDataParallel::enter(Phase phase) {
  Impl& m = *impl_;
  if (phase != Phase::TRAIN_BACKWARD) m.cast_buffers_for_forward();
  if (!m.gathers()) {
    if (!m.buffers_cast) return nullptr;
    return std::make_unique<GatherScope>([&m] { m.restore_buffers(); });
  }
  switch (phase) {
    case Phase::TRAIN_FORWARD:
      // The units gathered around their own forward do so as it reaches them; the rest now. FULL_SHARD frees those
      // after the forward, except the root's own parameters, which the backward needs first (as torch FSDP keeps the
      // root's); SHARD_GRAD_OP keeps everything until the backward is done.
      m.training_forward = true;
      m.order.clear();
      m.gather_whole_units();
      return std::make_unique<GatherScope>([&m] {
        m.restore_buffers();
        m.training_forward = false;
        if (std::uncaught_exceptions() > 0) {  // an aborted forward (automatic microbatching's retry): every rank
          m.abort_pass();                      // starts the next one from the same state
          return;
        }
        m.last_order = m.order;
        if (!m.frees_after_forward()) return;
        for (size_t u = 0; u + 1 < m.units.size(); ++u)
          if (!m.units[u].per_unit) m.release_unit(static_cast<int64_t>(u));
      });
    case Phase::TRAIN_BACKWARD:
      m.begin_backward(m.sync);
      m.gather_whole_units();
      return std::make_unique<GatherScope>([&m] {
        m.in_backward = false;
        if (std::uncaught_exceptions() > 0) m.abort_pass();
        m.release_all();
      });
    case Phase::EVAL_FORWARD:
    case Phase::PREDICT_FORWARD:
      break;
  }
  m.gather_all();
  return std::make_unique<GatherScope>([&m] {
    m.restore_buffers();
    m.release_all();
  });
}

std::optional<at::ScalarType> FullyShardedDataParallel::forward_input_dtype() const {
  return impl_->mixed_precision.param_dtype;
}

const MixedPrecisionDtypes& FullyShardedDataParallel::mixed_precision() const { return impl_->mixed_precision; }

std::unique_ptr<PhaseScope> FullyShardedDataParallel::gather_full_precision() {
  Impl& m = *impl_;
  std::vector<bool> was_gathered;
  for (const auto& f : m.flats) {
    if (f.gathered && m.gathers() && !f.in_full_state && f.compute_dtype != f.shard.scalar_type())
      throw std::logic_error("FSDP: gather_full_precision() inside a forward or backward pass");
    was_gathered.push_back(f.gathered);
  }
  m.full_precision = true;
  try {
    m.gather_all();
  } catch (...) {
    m.full_precision = false;
    throw;
  }
  m.full_precision = false;
  m.tp_make_whole();
  return std::make_unique<GatherScope>([&m, was_gathered] {
    m.tp_restore_local(/*keep=*/false);
    for (size_t k = 0; k < m.flats.size(); ++k)
      if (!was_gathered[k]) m.release(m.flats[k]);
  });
}

void FullyShardedDataParallel::clip_gradient_norm(double max_norm, double norm_type) {
  Impl& m = *impl_;
  at::NoGradGuard no_grad;
  const bool inf = std::isinf(norm_type);
  const auto add = [&](double& sum, const at::Tensor& g) {
    const double n = at::linalg_vector_norm(g, norm_type).item<double>();
    sum = inf ? std::max(sum, n) : sum + std::pow(n, norm_type);
  };
  double replicated = 0, split = 0;  // over the tensor-parallel split parameters' elements, and the others'
  std::vector<at::Tensor> grads;
  for (auto& f : m.flats) {
    const at::Tensor& g = f.shard.grad();
    if (!g.defined()) continue;
    grads.push_back(g);
    if (m.splits.empty()) {
      add(replicated, g);
      continue;
    }
    for (size_t i = 0; i < f.params.size(); ++i) {
      const detail::Held held = detail::held_range(f, i, m.sharded(), m.rank);
      if (held.size() > 0) add(f.pieces[i] ? split : replicated, g.narrow(0, held.in_shard, held.size()));
    }
  }
  if (m.sharded()) {  // the shard group holds each gradient element once (its replicas hold the same)
    at::Tensor t = at::tensor({replicated, split}, at::kDouble);
    all_reduce(t, inf ? ReduceOp::MAX : ReduceOp::SUM, m.shard_group);
    replicated = t[0].item<double>();
    split = t[1].item<double>();
  }
  double total =
      m.tp > 1 ? m.tp_total(replicated, split, inf) : (inf ? std::max(replicated, split) : replicated + split);
  if (!inf) total = std::pow(total, 1.0 / norm_type);
  const double coef = std::min(1.0, max_norm / (total + 1e-6));
  for (auto& g : grads) g.mul_(coef);
}

std::map<std::string, std::vector<double>> FullyShardedDataParallel::parameter_sums(const torch::nn::Module&,
                                                                                    size_t width,
                                                                                    const PartSums& part) {
  Impl& m = *impl_;
  at::NoGradGuard no_grad;
  // Each parameter's sums over the part of it this rank's shard holds (zeros where it holds none); one all-reduce
  // over the shard group (every rank has the same flats, so vectors of the same length and order).
  std::vector<std::string> names;
  std::vector<bool> whole;  // per name: a parameter tensor parallelism left whole on every rank of the group
  std::vector<double> sums;
  for (auto& f : m.flats) {
    if (f.frozen) continue;  // as the replicated strategies', the trainable parameters only
    for (size_t i = 0; i < f.params.size(); ++i) {
      names.push_back(f.names[i]);
      whole.push_back(!f.pieces[i]);
      const detail::Held held = detail::held_range(f, i, m.sharded(), m.rank);
      const std::vector<double> values =
          held.size() > 0 ? part(f.shard, held.in_shard, held.in_shard + held.size()) : std::vector<double>(width);
      check_part_width(values, width);
      sums.insert(sums.end(), values.begin(), values.end());
    }
  }
  at::Tensor t = at::tensor(sums, at::kDouble);
  if (m.sharded() && t.numel() > 0) all_reduce(t, ReduceOp::SUM, m.shard_group);
  if (m.tp > 1 && t.numel() > 0) {  // split parameters: summed over their parts; the others counted once
    if (m.tp_rank != 0) {
      for (size_t k = 0; k < names.size(); ++k)
        if (whole[k]) t.narrow(0, static_cast<int64_t>(k * width), static_cast<int64_t>(width)).zero_();
    }
    all_reduce(t, ReduceOp::SUM, m.tp_group);
  }
  const double* reduced = t.data_ptr<double>();
  std::map<std::string, std::vector<double>> out;
  for (size_t k = 0; k < names.size(); ++k) out[names[k]].assign(reduced + k * width, reduced + (k + 1) * width);
  return out;
}

ShardedMemory FullyShardedDataParallel::memory() const {
  ShardedMemory out;
  out.num_units = impl_->num_units;
  for (const auto& u : impl_->units) out.per_unit_gathered += u.per_unit ? 1 : 0;
  out.peak_training_gathered_bytes = impl_->peak_training_gathered_bytes;
  for (const auto& f : impl_->flats) {
    out.parameter_bytes += f.shard.numel() * static_cast<int64_t>(f.shard.element_size());
    out.full_parameter_bytes += f.numel * static_cast<int64_t>(f.shard.element_size());
  }
  return out;
}

std::vector<std::pair<std::string, at::Tensor>> FullyShardedDataParallel::gathered_parameters() {
  const auto gathered = gather_full_precision();
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& [name, p] : impl_->parameters) out.emplace_back(name, p.detach().clone());
  return out;
}

}  // namespace composer::dist
