#include "composer/dist/fully_sharded.h"

#include "composer/dist/dist.h"
#include "composer/dist/gradient_reducer.h"
#include "dist/detail/fully_sharded_impl.h"
#include "utils/detail/text.h"

#include <ATen/ATen.h>
#include <c10/core/StorageImpl.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <cmath>
#include <iostream>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>

namespace composer::dist {

std::string to_string(ShardingStrategy s) {
  switch (s) {
    case ShardingStrategy::FULL_SHARD:
      return "FULL_SHARD";
    case ShardingStrategy::SHARD_GRAD_OP:
      return "SHARD_GRAD_OP";
    case ShardingStrategy::NO_SHARD:
      return "NO_SHARD";
    case ShardingStrategy::HYBRID_SHARD:
      return "HYBRID_SHARD";
    case ShardingStrategy::HYBRID_SHARD_ZERO2:
      return "_HYBRID_SHARD_ZERO2";
  }
  return "?";
}

ShardingStrategy sharding_strategy_from_string(const std::string& text, const std::string& key) {
  // Composer upper-cases the name before looking it up.
  const std::string lower = composer::detail::to_lower(text);
  for (ShardingStrategy s : {ShardingStrategy::FULL_SHARD, ShardingStrategy::SHARD_GRAD_OP, ShardingStrategy::NO_SHARD,
                             ShardingStrategy::HYBRID_SHARD, ShardingStrategy::HYBRID_SHARD_ZERO2})
    if (lower == composer::detail::to_lower(to_string(s))) return s;
  throw std::invalid_argument(
      key + " must be FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD or _HYBRID_SHARD_ZERO2, got '" + text + "'");
}

DataParallelMesh DataParallelMesh::resolve(int64_t shard_degree, std::optional<int64_t> replicate_degree,
                                           int64_t world) {
  const auto degrees = [&] {
    return "data_parallel_shard_degree " + std::to_string(shard_degree) +
           (replicate_degree ? ", data_parallel_replicate_degree " + std::to_string(*replicate_degree) : "");
  };
  check_degree(shard_degree, "data_parallel_shard_degree");
  if (replicate_degree) check_degree(*replicate_degree, "data_parallel_replicate_degree");
  if (shard_degree == -1 && replicate_degree == -1) {
    throw std::invalid_argument("FSDP: " + degrees() +
                                ": only one of them may be -1 (it takes what the world size leaves)");
  }
  const int64_t given =
      (shard_degree == -1 ? 1 : shard_degree) * (replicate_degree && *replicate_degree != -1 ? *replicate_degree : 1);
  const bool fill = shard_degree == -1 || replicate_degree == -1;
  if (fill ? world % given != 0 : given != world) {
    throw std::invalid_argument("FSDP: " + degrees() + ": their product must " + (fill ? "divide" : "equal") +
                                " the world size " + std::to_string(world));
  }
  DataParallelMesh mesh;
  mesh.shard = shard_degree == -1 ? world / given : shard_degree;
  mesh.replicate = world / mesh.shard;
  return mesh;
}

void DataParallelMesh::check_degree(int64_t degree, const std::string& key) {
  if (degree == 0 || degree < -1)
    throw std::invalid_argument(key + " must be a positive number of ranks or -1, got " + std::to_string(degree));
}

ShardingStrategy DataParallelMesh::strategy_for(ShardingStrategy s, bool two_dimensional, bool* switched) {
  ShardingStrategy out = s;
  if (two_dimensional) {
    if (s == ShardingStrategy::NO_SHARD) {
      throw std::invalid_argument(
          "FSDP: sharding_strategy NO_SHARD with data_parallel_replicate_degree: NO_SHARD replicates on every rank "
          "already; leave the replicate degree unset, or use HYBRID_SHARD");
    }
    if (s == ShardingStrategy::FULL_SHARD) out = ShardingStrategy::HYBRID_SHARD;
    if (s == ShardingStrategy::SHARD_GRAD_OP) out = ShardingStrategy::HYBRID_SHARD_ZERO2;
  } else {
    if (s == ShardingStrategy::HYBRID_SHARD) out = ShardingStrategy::FULL_SHARD;
    if (s == ShardingStrategy::HYBRID_SHARD_ZERO2) out = ShardingStrategy::SHARD_GRAD_OP;
  }
  if (switched) *switched = out != s;
  return out;
}

std::string to_string(BackwardPrefetch p) {
  switch (p) {
    case BackwardPrefetch::BACKWARD_PRE:
      return "BACKWARD_PRE";
    case BackwardPrefetch::BACKWARD_POST:
      return "BACKWARD_POST";
    case BackwardPrefetch::NONE:
      return "NONE";
  }
  return "?";
}

BackwardPrefetch backward_prefetch_from_string(const std::string& text, const std::string& key) {
  const std::string lower = composer::detail::to_lower(text);
  for (BackwardPrefetch p : {BackwardPrefetch::BACKWARD_PRE, BackwardPrefetch::BACKWARD_POST, BackwardPrefetch::NONE})
    if (lower == composer::detail::to_lower(to_string(p))) return p;
  throw std::invalid_argument(key + " must be BACKWARD_PRE, BACKWARD_POST or NONE, got '" + text + "'");
}

at::ScalarType mixed_precision_dtype_from_string(const std::string& text, const std::string& key) {
  static const std::map<std::string, at::ScalarType> names{
      {"float32", at::kFloat},      {"torch.float32", at::kFloat},
      {"fp32", at::kFloat},         {"float16", at::kHalf},
      {"torch.float16", at::kHalf}, {"half", at::kHalf},
      {"fp16", at::kHalf},          {"amp", at::kHalf},
      {"amp_fp16", at::kHalf},      {"bfloat16", at::kBFloat16},
      {"bfloat", at::kBFloat16},    {"torch.bfloat16", at::kBFloat16},
      {"bf16", at::kBFloat16},      {"amp_bf16", at::kBFloat16},
      {"float64", at::kDouble},     {"torch.float64", at::kDouble},
      {"fp64", at::kDouble},        {"double", at::kDouble},
  };
  const auto it = names.find(text);
  if (it != names.end()) return it->second;
  throw std::invalid_argument(key + " must be a floating dtype (float32, bfloat16, float16, float64 or Composer's " +
                              "aliases such as fp32, bf16, amp_bf16), got '" + text + "'");
}

MixedPrecisionDtypes resolve_mixed_precision(const FSDPMixedPrecision& mp, at::ScalarType precision_dtype,
                                             const std::string& key) {
  if (mp.preset.empty()) return mp.dtypes;
  const std::string preset = composer::detail::to_lower(mp.preset);
  if (preset == "full") return {};
  if (preset == "default") return {precision_dtype, at::kFloat, precision_dtype};
  if (preset == "pure") return {precision_dtype, precision_dtype, precision_dtype};
  throw std::invalid_argument(key + " must be DEFAULT, PURE, FULL or a map of param_dtype, reduce_dtype and " +
                              "buffer_dtype, got '" + mp.preset + "'");
}

bool default_wrap_policy(const std::string&, const torch::nn::Module& module) {
  const std::string cls = module.name();
  for (const char* unit : {"GPTBlock", "BertLayer", "LlamaDecoderLayer", "BasicBlock", "ResNetBottleneck"}) {
    const std::string u(unit);
    if (cls.size() >= u.size() && cls.compare(cls.size() - u.size(), u.size(), u) == 0 &&
        (cls.size() == u.size() || cls[cls.size() - u.size() - 1] == ':'))
      return true;
  }
  return false;
}

namespace {

class GatherScope final : public PhaseScope {
 public:
  explicit GatherScope(std::function<void()> on_exit) : on_exit_(std::move(on_exit)) {}
  ~GatherScope() override {
    if (on_exit_) on_exit_();
  }

 private:
  std::function<void()> on_exit_;
};

}  // namespace

FullyShardedDataParallel::FullyShardedDataParallel(FSDPOptions options, at::ScalarType precision_dtype)
    : options_(std::move(options)), impl_(std::make_unique<Impl>()) {
  impl_->mixed_precision = resolve_mixed_precision(options_.mixed_precision(), precision_dtype);
  impl_->strategy = options_.sharding_strategy();
  impl_->backward_prefetch = options_.backward_prefetch();
  impl_->forward_prefetch = options_.forward_prefetch();
}

FullyShardedDataParallel::~FullyShardedDataParallel() = default;

int64_t FullyShardedDataParallel::num_replicas() const { return get_world_size(); }

ShardingStrategy FullyShardedDataParallel::effective_strategy() const { return impl_->strategy; }

DataParallelMesh FullyShardedDataParallel::mesh() const {
  DataParallelMesh mesh;
  mesh.replicate = impl_->set_up ? impl_->replicas : 1;
  mesh.shard = impl_->set_up ? impl_->world : get_world_size();
  return mesh;
}

namespace {

// The ranks of this rank's shard group (consecutive) and of its replica group (one per shard group, same place).
std::vector<int64_t> shard_group_ranks(const DataParallelMesh& mesh, int64_t rank) {
  std::vector<int64_t> ranks;
  for (int64_t i = 0; i < mesh.shard; ++i) ranks.push_back(rank / mesh.shard * mesh.shard + i);
  return ranks;
}
std::vector<int64_t> replica_group_ranks(const DataParallelMesh& mesh, int64_t rank) {
  std::vector<int64_t> ranks;
  for (int64_t i = 0; i < mesh.replicate; ++i) ranks.push_back(rank % mesh.shard + i * mesh.shard);
  return ranks;
}

}  // namespace

void FullyShardedDataParallel::setup(torch::nn::Module& model, torch::optim::Optimizer* optimizer) {
  Impl& m = *impl_;
  if (!m.flats.empty()) throw std::logic_error("FSDP: setup() called twice");
  if (!optimizer) throw std::invalid_argument("FSDP: the model is sharded together with its optimizer; none given");
  if (!optimizer->state().empty()) {
    throw std::invalid_argument(
        "FSDP: the optimizer already has state (a step was taken or a checkpoint loaded); FSDP shards a fresh "
        "optimizer");
  }
  const int64_t world = get_world_size(), global_rank = get_global_rank();
  const DataParallelMesh mesh = DataParallelMesh::resolve(options_.data_parallel_shard_degree(),
                                                          options_.data_parallel_replicate_degree(), world);
  bool switched = false;
  m.strategy = DataParallelMesh::strategy_for(options_.sharding_strategy(),
                                              options_.data_parallel_replicate_degree().has_value(), &switched);
  if (switched && global_rank == 0) {
    std::cerr << "composer: warning: FSDP sharding_strategy " << to_string(options_.sharding_strategy())
              << (options_.data_parallel_replicate_degree() ? " with" : " without")
              << " data_parallel_replicate_degree: using " << to_string(m.strategy) << " (as Composer)\n";
  }
  m.world = mesh.shard;  // the shard group's size and this rank's place in it
  m.rank = global_rank % mesh.shard;
  m.replicas = mesh.replicate;
  m.reports = global_rank / mesh.shard == 0;
  if (mesh.replicate > 1 && mesh.shard > 1) {
    // Every rank makes its shard group, then its replica group: the same order on every member of each.
    m.shard_group = new_group(shard_group_ranks(mesh, global_rank));
    m.replica_group = new_group(replica_group_ranks(mesh, global_rank));
  }
  // A shard group of one process has nothing to shard: as torch FSDP does, it runs as NO_SHARD (no gathering
  // copies; the gradients all-reduced over every rank).
  if (m.world == 1) {
    m.strategy = ShardingStrategy::NO_SHARD;
    m.reports = global_rank == 0;
  }
  // torch FSDP's averaging of the gradients over all data-parallel ranks: predivided by the largest power of two f
  // dividing the world size with f * f < world (in torch's loop), postdivided by world / f.
  m.predivide = 1;
  while (world % static_cast<int64_t>(m.predivide) == 0 && static_cast<double>(world) / m.predivide > m.predivide)
    m.predivide *= 2;
  m.postdivide = static_cast<double>(world) / m.predivide;
  const std::optional<at::ScalarType> param_dtype = m.mixed_precision.param_dtype;
  const auto compute_dtype_of = [&](at::ScalarType own) {
    return param_dtype && at::isFloatingType(own) ? *param_dtype : own;
  };
  std::map<const c10::TensorImpl*, std::string> name_of;
  for (const auto& p : model.named_parameters(/*recurse=*/true))
    name_of.emplace(p.value().unsafeGetTensorImpl(), p.key());
  if (options_.sync_module_states()) {
    std::vector<at::Tensor> tensors = model.parameters();
    for (const auto& b : model.buffers()) tensors.push_back(b);
    broadcast_module(tensors);
  }

  // The units: each submodule the policy picks claims its parameters not claimed by a unit inside it (children come
  // after their parents in named_modules(), so walk it backwards); the root unit holds the rest.
  std::set<const c10::TensorImpl*> claimed;
  std::vector<std::vector<at::Tensor>> units;
  std::vector<torch::nn::Module*> unit_modules;  // nullptr for the root
  auto take = [&](const std::string& name, torch::nn::Module& module, bool root) {
    std::vector<at::Tensor> unit;
    for (const auto& p : module.parameters(/*recurse=*/true)) {
      if (!p.requires_grad() || claimed.count(p.unsafeGetTensorImpl())) continue;
      claimed.insert(p.unsafeGetTensorImpl());
      unit.push_back(p);
    }
    if (unit.empty()) return;
    units.push_back(std::move(unit));
    unit_modules.push_back(root ? nullptr : &module);
    m.units.emplace_back();
    m.units.back().name = name;
  };
  if (options_.auto_wrap()) {
    const WrapPolicy policy = options_.wrap_policy() ? options_.wrap_policy() : WrapPolicy(default_wrap_policy);
    const auto modules = model.named_modules("", /*include_self=*/false);
    for (auto it = modules.end(); it != modules.begin();) {
      --it;
      if (policy(it->key(), *it->value())) take(it->key(), *it->value(), false);
    }
  }
  take("", model, true);
  m.num_units = static_cast<int64_t>(units.size());
  for (const auto& p : model.named_parameters(/*recurse=*/true))
    if (p.value().requires_grad()) m.trainable.emplace_back(p.key(), p.value());

  // Which optimizer group each parameter is in (-1: none; its shard gets gradients but is never stepped).
  auto& groups = optimizer->param_groups();
  std::map<const c10::TensorImpl*, int64_t> group_of;
  for (size_t g = 0; g < groups.size(); ++g) {
    for (const auto& p : groups[g].params()) {
      if (!group_of.emplace(p.unsafeGetTensorImpl(), static_cast<int64_t>(g)).second)
        throw std::invalid_argument("FSDP: a parameter is in two optimizer parameter groups");
    }
  }
  std::vector<std::vector<int64_t>> group_flats(groups.size());
  at::NoGradGuard no_grad;
  for (size_t u = 0; u < units.size(); ++u) {
    const auto& unit = units[u];
    std::map<std::pair<int64_t, int>, FlatParam> by_group;  // (group, dtype) -> flat
    for (const auto& p : unit) {
      const auto g = group_of.find(p.unsafeGetTensorImpl());
      FlatParam& f = by_group[{g == group_of.end() ? -1 : g->second, static_cast<int>(p.scalar_type())}];
      f.params.push_back(p);
      f.names.push_back(name_of.at(p.unsafeGetTensorImpl()));
      f.shapes.push_back(p.sizes().vec());
      f.offsets.push_back(f.numel);
      f.numel += p.numel();
    }
    for (auto& [key, f] : by_group) {
      const int64_t parts = m.sharded() ? m.world : 1;
      f.shard_numel = (f.numel + parts - 1) / parts;
      at::Tensor flat = at::zeros({f.shard_numel * parts}, f.params[0].options().requires_grad(false));
      for (size_t i = 0; i < f.params.size(); ++i)
        flat.narrow(0, f.offsets[i], f.params[i].numel()).copy_(f.params[i].detach().reshape(-1));
      f.shard = (m.sharded() ? flat.narrow(0, m.rank * f.shard_numel, f.shard_numel).clone() : flat);
      f.shard.set_requires_grad(true);
      f.compute_dtype = compute_dtype_of(f.shard.scalar_type());
      // torch's rule: reduce_dtype, else param_dtype when that is given, else the parameters' own.
      f.reduce_dtype = m.mixed_precision.reduce_dtype ? *m.mixed_precision.reduce_dtype : f.compute_dtype;
      if (f.compute_dtype != f.shard.scalar_type()) m.low_precision_params = true;
      if (m.sharded()) {
        f.gathered = true;  // the parameters still hold their values until release()
        m.release(f);
      } else {
        m.point_params_at(f, f.shard.detach());
        f.gathered = true;
      }
      if (key.first >= 0) group_flats[static_cast<size_t>(key.first)].push_back(static_cast<int64_t>(m.flats.size()));
      f.unit = static_cast<int64_t>(u);
      m.units[u].flats.push_back(static_cast<int64_t>(m.flats.size()));
      m.units[u].params += static_cast<int64_t>(f.params.size());
      m.flats.push_back(std::move(f));
    }
  }
  m.slots.assign(groups.size(), {});
  m.group_names.assign(groups.size(), {});
  for (size_t g = 0; g < groups.size(); ++g) {
    std::vector<at::Tensor> params;
    for (const auto& p : groups[g].params()) {
      const auto named = name_of.find(p.unsafeGetTensorImpl());
      m.group_names[g].push_back(named == name_of.end() ? std::string() : named->second);
    }
    for (const auto& p : groups[g].params()) {
      if (claimed.count(p.unsafeGetTensorImpl())) continue;
      params.push_back(p);  // frozen ones stay as they are
      const auto named = name_of.find(p.unsafeGetTensorImpl());
      m.slots[g].push_back({-1, named == name_of.end() ? std::string() : named->second});
    }
    for (const int64_t k : group_flats[g]) {
      params.push_back(m.flats[static_cast<size_t>(k)].shard);
      m.slots[g].push_back({k, ""});
    }
    groups[g].params() = std::move(params);
  }
  // Unsharded flats computing in param_dtype are gathered (cast) like sharded ones: empty until then.
  if (!m.sharded() && m.low_precision_params) {
    for (auto& f : m.flats) {
      f.gathered = true;
      m.release(f);
    }
  }
  if (const auto buffer_dtype = m.mixed_precision.buffer_dtype) {
    for (const auto& b : model.buffers(/*recurse=*/true))
      if (b.defined() && at::isFloatingType(b.scalar_type()) && b.scalar_type() != *buffer_dtype)
        m.cast_buffers.push_back({b, b.detach()});
  }
  m.wrap_units(model, unit_modules);
  m.set_up = true;
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

BatchTotals FullyShardedDataParallel::reduce_batch(BatchTotals local) { return reduce_over_ranks(std::move(local)); }

void FullyShardedDataParallel::sum_metric_state(at::Tensor& state) { all_reduce(state); }

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
  return std::make_unique<GatherScope>([&m, was_gathered] {
    for (size_t k = 0; k < m.flats.size(); ++k)
      if (!was_gathered[k]) m.release(m.flats[k]);
  });
}

void FullyShardedDataParallel::clip_gradient_norm(double max_norm, double norm_type) {
  Impl& m = *impl_;
  at::NoGradGuard no_grad;
  const bool inf = std::isinf(norm_type);
  double local = 0;
  std::vector<at::Tensor> grads;
  for (auto& f : m.flats) {
    const at::Tensor& g = f.shard.grad();
    if (!g.defined()) continue;
    grads.push_back(g);
    const double n = at::linalg_vector_norm(g, norm_type).item<double>();
    local = inf ? std::max(local, n) : local + std::pow(n, norm_type);
  }
  double total = local;
  if (m.sharded()) {  // the shard group holds each gradient element once (its replicas hold the same)
    at::Tensor t = at::full({1}, local, at::kDouble);
    all_reduce(t, inf ? ReduceOp::MAX : ReduceOp::SUM, m.shard_group);
    total = t.item<double>();
  }
  if (!inf) total = std::pow(total, 1.0 / norm_type);
  const double coef = std::min(1.0, max_norm / (total + 1e-6));
  for (auto& g : grads) g.mul_(coef);
}

std::map<std::string, double> FullyShardedDataParallel::gradient_norms(const torch::nn::Module&) {
  Impl& m = *impl_;
  at::NoGradGuard no_grad;
  // Each parameter's squares over the part of it this rank's shard holds, and whether the rank had a gradient for
  // it; one all-reduce over the shard group (every rank has the same flats, so the same vector).
  std::vector<std::string> names;
  std::vector<double> sums;
  for (auto& f : m.flats) {
    const at::Tensor& g = f.shard.grad();
    const int64_t begin = m.sharded() ? m.rank * f.shard_numel : 0;
    for (size_t i = 0; i < f.params.size(); ++i) {
      names.push_back(f.names[i]);
      const int64_t lo = std::max(f.offsets[i], begin);
      const int64_t hi = std::min(f.offsets[i] + c10::multiply_integers(f.shapes[i]), begin + f.shard_numel);
      double squares = 0;
      if (g.defined() && hi > lo)
        squares = g.narrow(0, lo - begin, hi - lo).to(at::kDouble).square().sum().item<double>();
      sums.push_back(squares);
      sums.push_back(g.defined() ? 1.0 : 0.0);
    }
  }
  at::Tensor t = at::tensor(sums, at::kDouble);
  if (m.sharded() && t.numel() > 0) all_reduce(t, ReduceOp::SUM, m.shard_group);
  const double* reduced = t.data_ptr<double>();
  std::map<std::string, double> norms;
  for (size_t k = 0; k < names.size(); ++k)
    if (reduced[2 * k + 1] > 0) norms[names[k]] = std::sqrt(reduced[2 * k]);
  return norms;
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
  for (const auto& [name, p] : impl_->trainable) out.emplace_back(name, p.detach().clone());
  return out;
}

}  // namespace composer::dist
