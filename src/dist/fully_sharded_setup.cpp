// FSDP's setup in named phases: the checks, the device mesh, the plan of the sharding units (a pure function of the
// model and the wrap policy), the flat buffers and this rank's shards, and the optimizer's groups pointed at them.
#include "composer/dist/fully_sharded.h"

#include "composer/dist/dist.h"
#include "composer/dist/gradient_reducer.h"
#include "composer/nn/checkpoint.h"
#include "composer/nn/deferred_init.h"
#include "dist/detail/fully_sharded_impl.h"

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <iostream>
#include <map>
#include <set>
#include <stdexcept>
#include <tuple>

namespace composer::dist {

using detail::FlatParam;

namespace {

using ParamNames = std::map<const c10::TensorImpl*, std::string>;
using GroupOf = std::map<const c10::TensorImpl*, int64_t>;

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

// The sharding units: each submodule the policy picks claims its parameters (frozen ones too, as torch FSDP shards
// them) not claimed by a unit inside it (children come after their parents in named_modules(), so walk it
// backwards); the root unit holds the rest.
struct UnitPlan {
  std::vector<std::string> names;               // "" for the root
  std::vector<std::vector<at::Tensor>> params;  // per unit
  std::vector<torch::nn::Module*> modules;      // nullptr for the root
  std::set<const c10::TensorImpl*> claimed;     // every parameter
};

UnitPlan plan_units(torch::nn::Module& model, const WrapPolicy& policy) {
  UnitPlan plan;
  auto take = [&](const std::string& name, torch::nn::Module& module, bool root) {
    std::vector<at::Tensor> unit;
    for (const auto& p : module.parameters(/*recurse=*/true)) {
      if (plan.claimed.count(p.unsafeGetTensorImpl())) continue;
      plan.claimed.insert(p.unsafeGetTensorImpl());
      unit.push_back(p);
    }
    if (unit.empty()) return;
    plan.params.push_back(std::move(unit));
    plan.modules.push_back(root ? nullptr : &module);
    plan.names.push_back(name);
  };
  if (policy) {
    const auto modules = model.named_modules("", /*include_self=*/false);
    for (auto it = modules.end(); it != modules.begin();) {
      --it;
      if (policy(it->key(), *it->value())) take(it->key(), *it->value(), false);
    }
  }
  take("", model, true);
  return plan;
}

// Which optimizer group each parameter is in (absent: none; its shard gets gradients but is never stepped).
GroupOf optimizer_groups(const std::vector<torch::optim::OptimizerParamGroup>& groups) {
  GroupOf group_of;
  for (size_t g = 0; g < groups.size(); ++g) {
    for (const auto& p : groups[g].params()) {
      if (!group_of.emplace(p.unsafeGetTensorImpl(), static_cast<int64_t>(g)).second)
        throw std::invalid_argument("FSDP: a parameter is in two optimizer parameter groups");
    }
  }
  return group_of;
}

// A unit's parameters laid out as one flat buffer per (optimizer group, dtype, frozen), not yet sharded.
using FlatKey = std::tuple<int64_t, int, bool>;
std::map<FlatKey, FlatParam> lay_out_unit(const std::vector<at::Tensor>& unit, const GroupOf& group_of,
                                          const ParamNames& name_of) {
  std::map<FlatKey, FlatParam> by_group;
  for (const auto& p : unit) {
    const auto g = group_of.find(p.unsafeGetTensorImpl());
    FlatParam& f =
        by_group[{g == group_of.end() ? -1 : g->second, static_cast<int>(p.scalar_type()), !p.requires_grad()}];
    f.frozen = !p.requires_grad();
    f.params.push_back(p);
    f.names.push_back(name_of.at(p.unsafeGetTensorImpl()));
    f.shapes.push_back(p.sizes().vec());
    f.offsets.push_back(f.numel);
    f.numel += p.numel();
  }
  return by_group;
}

// Whether the model's initialization is deferred (nn::DeferredInit), agreed on by every rank; each rank then draws
// from rank 0's generator states, so that all of them hold shards of one model (sync_module_states for the values
// that do not exist yet).
bool agree_on_deferred_init(torch::nn::Module& model) {
  std::vector<at::Tensor> states = nn::deferred_generator_states(model);
  const auto records = static_cast<int64_t>(states.size());
  at::Tensor counts = at::tensor({records, -records}, at::kLong);
  all_reduce(counts, ReduceOp::MAX);
  if (counts[0].item<int64_t>() != records || -counts[1].item<int64_t>() != records) {
    throw std::invalid_argument(
        "FSDP: the ranks built their models differently: some with nn::DeferredInit, some without (or from a "
        "different number of DeferredInit records); build the same model the same way on every rank");
  }
  if (records == 0) return false;
  for (auto& state : states) {
    state = state.clone();
    broadcast(state, 0);
  }
  nn::set_deferred_generator_states(model, states);
  return true;
}

}  // namespace

// The mesh of shard and replica groups, the strategy it switches to (as Composer), and torch FSDP's gradient
// averaging factors.
void FullyShardedDataParallel::Impl::configure_mesh(const FSDPOptions& o) {
  const int64_t world_size = get_world_size(), global_rank = get_global_rank();
  tp = tp_degree(o, tp_options, world_size);
  tp_rank = global_rank % tp;
  const int64_t dp_size = world_size / tp, dp_rank = global_rank / tp;
  const DataParallelMesh mesh =
      DataParallelMesh::resolve(o.data_parallel_shard_degree(), o.data_parallel_replicate_degree(), dp_size);
  bool switched = false;
  strategy =
      DataParallelMesh::strategy_for(o.sharding_strategy(), o.data_parallel_replicate_degree().has_value(), &switched);
  if (switched && global_rank == 0) {
    std::cerr << "composer: warning: FSDP sharding_strategy " << to_string(o.sharding_strategy())
              << (o.data_parallel_replicate_degree() ? " with" : " without")
              << " data_parallel_replicate_degree: using " << to_string(strategy) << " (as Composer)\n";
  }
  world = mesh.shard;  // the shard group's size and this rank's place in it
  rank = dp_rank % mesh.shard;
  replicas = mesh.replicate;
  reports = dp_rank / mesh.shard == 0;
  // The mesh (replicate, shard, tp), tp innermost: data-parallel rank d at tensor-parallel place t is global rank
  // d * tp + t. Every rank makes its groups in the same order: tensor-parallel, data-parallel, shard, replica.
  const auto global = [&](std::vector<int64_t> dp_ranks) {
    for (auto& r : dp_ranks) r = r * tp + tp_rank;
    return dp_ranks;
  };
  if (tp > 1) {
    std::vector<int64_t> tp_ranks, dp_ranks;
    for (int64_t t = 0; t < tp; ++t) tp_ranks.push_back(dp_rank * tp + t);
    for (int64_t d = 0; d < dp_size; ++d) dp_ranks.push_back(d);
    tp_group = new_group(tp_ranks);
    dp_group = new_group(global(dp_ranks));
  }
  if (tp > 1 || (mesh.replicate > 1 && mesh.shard > 1)) {
    shard_group = new_group(global(shard_group_ranks(mesh, dp_rank)));
    replica_group = new_group(global(replica_group_ranks(mesh, dp_rank)));
  }
  // A shard group of one process has nothing to shard: as torch FSDP does, it runs as NO_SHARD (no gathering
  // copies; the gradients all-reduced over every data-parallel rank).
  if (world == 1) {
    strategy = ShardingStrategy::NO_SHARD;
    reports = dp_rank == 0;  // each tensor-parallel rank's first data-parallel replica
  }
  // torch FSDP's averaging of the gradients over all data-parallel ranks: predivided by the largest power of two f
  // dividing the world size with f * f < world (in torch's loop), postdivided by world / f.
  predivide = 1;
  while (dp_size % static_cast<int64_t>(predivide) == 0 && static_cast<double>(dp_size) / predivide > predivide)
    predivide *= 2;
  postdivide = static_cast<double>(dp_size) / predivide;
}

// This rank's shard of a laid-out flat buffer (the whole buffer under NO_SHARD), its dtypes, and the module's
// parameters released (sharded) or pointed at it.
void FullyShardedDataParallel::Impl::shard_flat(FlatParam& f) {
  f.pieces.assign(f.params.size(), std::nullopt);
  for (size_t i = 0; i < f.params.size(); ++i)
    if (const auto it = split_index.find(f.params[i].unsafeGetTensorImpl()); it != split_index.end())
      f.pieces[i] = splits[it->second].split;
  const int64_t parts = sharded() ? world : 1;
  f.shard_numel = (f.numel + parts - 1) / parts;
  // Only this rank's part is built: the elements of each parameter that fall into it, the padding zeros.
  f.shard = at::zeros({f.shard_numel}, f.params[0].options().requires_grad(false));
  for (size_t i = 0; i < f.params.size(); ++i) {
    const detail::Held held = detail::held_range(f, i, sharded(), rank);
    if (held.size() == 0) continue;
    const at::Tensor& p = f.params[i];  // a pretrained file's tensor left deferred: only this part is read
    f.shard.narrow(0, held.in_shard, held.size())
        .copy_(nn::is_deferred(p) ? nn::read_part(p, held.begin, held.size())
                                  : p.detach().reshape(-1).narrow(0, held.begin, held.size()));
  }
  f.shard.set_requires_grad(!f.frozen);
  const at::ScalarType own = f.shard.scalar_type();
  f.compute_dtype = mixed_precision.param_dtype && at::isFloatingType(own) ? *mixed_precision.param_dtype : own;
  // torch's rule: reduce_dtype, else param_dtype when that is given, else the parameters' own.
  f.reduce_dtype = mixed_precision.reduce_dtype ? *mixed_precision.reduce_dtype : f.compute_dtype;
  if (f.compute_dtype != own) low_precision_params = true;
  if (sharded()) {
    f.gathered = true;  // the parameters still hold their values until release()
    release(f);
  } else {
    point_params_at(f, f.shard.detach());
    f.gathered = true;
  }
}

// Each optimizer group's parameters become its flats' shards (after any parameter no unit claimed, kept as it is);
// slots and group_names record what each parameter of the optimizer's state dict is.
void FullyShardedDataParallel::Impl::rewire_optimizer(std::vector<torch::optim::OptimizerParamGroup>& groups,
                                                      const std::vector<std::vector<int64_t>>& group_flats,
                                                      const std::set<const c10::TensorImpl*>& claimed,
                                                      const ParamNames& name_of) {
  const auto name = [&](const at::Tensor& p) {
    const auto named = name_of.find(p.unsafeGetTensorImpl());
    return named == name_of.end() ? std::string() : named->second;
  };
  slots.assign(groups.size(), {});
  group_names.assign(groups.size(), {});
  for (size_t g = 0; g < groups.size(); ++g) {
    std::vector<at::Tensor> params;
    for (const auto& p : groups[g].params()) group_names[g].push_back(name(p));
    for (const auto& p : groups[g].params()) {
      if (claimed.count(p.unsafeGetTensorImpl())) continue;
      params.push_back(p);  // not the model's: stays as it is
      slots[g].push_back({-1, name(p)});
    }
    for (const int64_t k : group_flats[g]) {
      params.push_back(flats[static_cast<size_t>(k)].shard);
      slots[g].push_back({k, ""});
    }
    groups[g].params() = std::move(params);
  }
}

void FullyShardedDataParallel::setup(torch::nn::Module& model, torch::optim::Optimizer* optimizer) {
  Impl& m = *impl_;
  if (!m.flats.empty()) throw std::logic_error("FSDP: setup() called twice");
  if (!optimizer) throw std::invalid_argument("FSDP: the model is sharded together with its optimizer; none given");
  if (!optimizer->state().empty()) {
    throw std::invalid_argument(
        "FSDP: the optimizer already has state (a step was taken or a checkpoint loaded); FSDP shards a fresh "
        "optimizer");
  }
  m.configure_mesh(options_);
  const bool deferred = agree_on_deferred_init(model);
  if (options_.sync_module_states()) {
    std::vector<at::Tensor> tensors;
    for (const auto& p : model.parameters())
      if (!nn::is_deferred(p)) tensors.push_back(p);  // deferred ones: every rank draws rank 0's stream
    for (const auto& b : model.buffers()) tensors.push_back(b);
    broadcast_module(tensors);
  }
  if (m.tp > 1) m.split_for_tensor_parallel(model);  // before the wrappers and the units: Composer's order
  if (m.checkpointing_policy &&
      nn::apply_activation_checkpointing(model, m.checkpointing_policy, options_.activation_cpu_offload()) == 0) {
    throw std::invalid_argument(
        "parallelism_config.fsdp.activation_checkpointing: no module of the model is picked for checkpointing (the "
        "default picks the sharding units: GPTBlock, BertLayer, LlamaDecoderLayer, BasicBlock, ResNetBottleneck)");
  }
  ParamNames name_of;
  for (const auto& p : model.named_parameters(/*recurse=*/true))
    name_of.emplace(p.value().unsafeGetTensorImpl(), p.key());
  const WrapPolicy none;
  const UnitPlan plan = plan_units(
      model, options_.auto_wrap() ? (options_.wrap_policy() ? options_.wrap_policy() : WrapPolicy(default_wrap_policy))
                                  : none);
  m.num_units = static_cast<int64_t>(plan.params.size());
  for (const auto& p : model.named_parameters(/*recurse=*/true)) m.parameters.emplace_back(p.key(), p.value());

  auto& groups = optimizer->param_groups();
  const GroupOf group_of = optimizer_groups(groups);
  std::vector<std::vector<int64_t>> group_flats(groups.size());
  at::NoGradGuard no_grad;
  // Each unit laid out and sharded as soon as its parameters hold values: a deferred model is drawn unit by unit,
  // each unit's whole parameters freed (release) before the next one's are drawn.
  std::vector<std::map<FlatKey, FlatParam>> laid(plan.params.size());
  const auto shard_unit = [&](size_t u) {
    laid[u] = lay_out_unit(plan.params[u], group_of, name_of);
    for (auto& entry : laid[u]) m.shard_flat(entry.second);
  };
  if (deferred) {
    nn::materialize(model, plan.params, shard_unit, /*by_parts=*/true);
  } else {
    for (size_t u = 0; u < plan.params.size(); ++u) shard_unit(u);
  }
  for (size_t u = 0; u < plan.params.size(); ++u) {
    m.units.emplace_back();
    m.units.back().name = plan.names[u];
    for (auto& [key, f] : laid[u]) {
      const int64_t group = std::get<0>(key);
      if (group >= 0) group_flats[static_cast<size_t>(group)].push_back(static_cast<int64_t>(m.flats.size()));
      f.unit = static_cast<int64_t>(u);
      m.units[u].flats.push_back(static_cast<int64_t>(m.flats.size()));
      if (!f.frozen) m.units[u].params += static_cast<int64_t>(f.params.size());
      m.units[u].has_frozen = m.units[u].has_frozen || f.frozen;
      m.flats.push_back(std::move(f));
    }
  }
  m.rewire_optimizer(groups, group_flats, plan.claimed, name_of);
  m.finish_setup(model, plan.modules);
}

// Unsharded flats computing in param_dtype are gathered (cast) like sharded ones: empty until then. Floating buffers
// are cast to buffer_dtype for the forward passes, and the units wrapped.
void FullyShardedDataParallel::Impl::finish_setup(torch::nn::Module& model,
                                                  const std::vector<torch::nn::Module*>& unit_modules) {
  if (!sharded() && low_precision_params) {
    for (auto& f : flats) {
      f.gathered = true;
      release(f);
    }
  }
  if (const auto buffer_dtype = mixed_precision.buffer_dtype) {
    for (const auto& b : model.buffers(/*recurse=*/true))
      if (b.defined() && at::isFloatingType(b.scalar_type()) && b.scalar_type() != *buffer_dtype)
        cast_buffers.push_back({b, b.detach()});
  }
  wrap_units(model, unit_modules);
  set_up = true;
}

}  // namespace composer::dist
