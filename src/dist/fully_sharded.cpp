#include "composer/dist/fully_sharded.h"

#include "composer/dist/dist.h"
#include "composer/dist/gradient_reducer.h"

#include <ATen/ATen.h>
#include <c10/core/StorageImpl.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <cmath>
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
  }
  return "?";
}

ShardingStrategy sharding_strategy_from_string(const std::string& text, const std::string& key) {
  for (ShardingStrategy s : {ShardingStrategy::FULL_SHARD, ShardingStrategy::SHARD_GRAD_OP, ShardingStrategy::NO_SHARD})
    if (text == to_string(s)) return s;
  if (text == "HYBRID_SHARD" || text == "_HYBRID_SHARD_ZERO2") {
    throw std::invalid_argument(key + " " + text +
                                " is not supported yet by Composer C++ (sharding within a node, replication across "
                                "nodes); use FULL_SHARD, SHARD_GRAD_OP or NO_SHARD");
  }
  throw std::invalid_argument(key + " must be FULL_SHARD, SHARD_GRAD_OP or NO_SHARD, got '" + text + "'");
}

bool default_wrap_policy(const std::string&, const torch::nn::Module& module) {
  const std::string cls = module.name();
  for (const char* unit : {"GPTBlock", "BertLayer", "BasicBlock", "ResNetBottleneck"}) {
    const std::string u(unit);
    if (cls.size() >= u.size() && cls.compare(cls.size() - u.size(), u.size(), u) == 0 &&
        (cls.size() == u.size() || cls[cls.size() - u.size() - 1] == ':'))
      return true;
  }
  return false;
}

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

void allocate_storage(at::Tensor& full, int64_t numel, const at::TensorOptions& options) {
  if (!full.defined()) {
    full = at::empty({numel}, options);
    return;
  }
  c10::StorageImpl* storage = full.storage().unsafeGetStorageImpl();
  const size_t bytes = static_cast<size_t>(numel) * full.element_size();
  storage->set_data_ptr_noswap(storage->allocator()->allocate(bytes));
  storage->set_nbytes(bytes);
}

void release_storage(at::Tensor& full) {
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

FullyShardedDataParallel::FullyShardedDataParallel(FSDPOptions options)
    : options_(std::move(options)), impl_(std::make_unique<Impl>()) {
  impl_->strategy = options_.sharding_strategy();
}

FullyShardedDataParallel::~FullyShardedDataParallel() = default;

int64_t FullyShardedDataParallel::num_replicas() const { return get_world_size(); }

void FullyShardedDataParallel::setup(torch::nn::Module& model, torch::optim::Optimizer* optimizer) {
  Impl& m = *impl_;
  if (!m.flats.empty()) throw std::logic_error("FSDP: setup() called twice");
  if (!optimizer) throw std::invalid_argument("FSDP: the model is sharded together with its optimizer; none given");
  if (!optimizer->state().empty()) {
    throw std::invalid_argument(
        "FSDP: the optimizer already has state (a step was taken or a checkpoint loaded); FSDP shards a fresh "
        "optimizer");
  }
  m.world = get_world_size();
  m.rank = get_global_rank();
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
  auto take = [&](torch::nn::Module& module) {
    std::vector<at::Tensor> unit;
    for (const auto& p : module.parameters(/*recurse=*/true)) {
      if (!p.requires_grad() || claimed.count(p.unsafeGetTensorImpl())) continue;
      claimed.insert(p.unsafeGetTensorImpl());
      unit.push_back(p);
    }
    if (!unit.empty()) units.push_back(std::move(unit));
  };
  if (options_.auto_wrap()) {
    const WrapPolicy policy = options_.wrap_policy() ? options_.wrap_policy() : WrapPolicy(default_wrap_policy);
    const auto modules = model.named_modules("", /*include_self=*/false);
    for (auto it = modules.end(); it != modules.begin();) {
      --it;
      if (policy(it->key(), *it->value())) take(*it->value());
    }
  }
  take(model);
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
  for (const auto& unit : units) {
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
      if (m.sharded()) {
        f.gathered = true;  // the parameters still hold their values until release()
        m.release(f);
      } else {
        m.point_params_at(f, f.shard.detach());
        f.gathered = true;
      }
      if (key.first >= 0) group_flats[static_cast<size_t>(key.first)].push_back(static_cast<int64_t>(m.flats.size()));
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
  m.set_up = true;
}

double FullyShardedDataParallel::mean_batch_samples(double local_samples) { return mean_over_ranks(local_samples); }

void FullyShardedDataParallel::zero_grad() {
  for (auto& f : impl_->flats)
    for (auto& p : f.params) p.mutable_grad() = at::Tensor();
}

void FullyShardedDataParallel::after_backward(bool sync) {
  if (sync) impl_->reduce_gradients();
}

void FullyShardedDataParallel::sync_gradients() { impl_->reduce_gradients(); }

BatchTotals FullyShardedDataParallel::reduce_batch(BatchTotals local) { return reduce_over_ranks(std::move(local)); }

void FullyShardedDataParallel::sum_metric_state(at::Tensor& state) { all_reduce(state); }

std::unique_ptr<PhaseScope> FullyShardedDataParallel::enter(Phase phase) {
  Impl& m = *impl_;
  if (!m.sharded()) return nullptr;
  m.gather_all();
  // FULL_SHARD frees the gathered weights after the forward and gathers them again for the backward; SHARD_GRAD_OP
  // keeps them from the forward until the backward is done.
  const bool release = phase != Phase::TRAIN_FORWARD || m.strategy == ShardingStrategy::FULL_SHARD;
  if (!release) return nullptr;
  return std::make_unique<GatherScope>([&m] { m.release_all(); });
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
  if (m.sharded()) {
    at::Tensor t = at::full({1}, local, at::kDouble);
    all_reduce(t, inf ? ReduceOp::MAX : ReduceOp::SUM);
    total = t.item<double>();
  }
  if (!inf) total = std::pow(total, 1.0 / norm_type);
  const double coef = std::min(1.0, max_norm / (total + 1e-6));
  for (auto& g : grads) g.mul_(coef);
}

ShardedMemory FullyShardedDataParallel::memory() const {
  ShardedMemory out;
  out.num_units = impl_->num_units;
  for (const auto& f : impl_->flats) {
    out.parameter_bytes += f.shard.numel() * static_cast<int64_t>(f.shard.element_size());
    out.full_parameter_bytes += f.numel * static_cast<int64_t>(f.shard.element_size());
  }
  return out;
}

std::vector<std::pair<std::string, at::Tensor>> FullyShardedDataParallel::gathered_parameters() {
  Impl& m = *impl_;
  const bool was_gathered = m.flats.empty() || m.flats.front().gathered;
  m.gather_all();
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& [name, p] : m.trainable) out.emplace_back(name, p.detach().clone());
  if (!was_gathered) m.release_all();
  return out;
}

}  // namespace composer::dist

namespace composer::dist {
namespace {

using GenericDict = c10::impl::GenericDict;
using GenericList = c10::impl::GenericList;

GenericDict string_keyed() { return GenericDict(c10::StringType::get(), c10::AnyType::get()); }

GenericDict indexed_form(const c10::IValue& sd, const char* what) {
  if (!sd.isGenericDict() || !sd.toGenericDict().contains("state") || !sd.toGenericDict().contains("param_groups")) {
    throw std::invalid_argument(std::string("FSDP: ") + what +
                                " is not in torch's form ({state, param_groups}); under FSDP the optimizer must be "
                                "one of composer::optim's (LibTorch's own optimizers keep an opaque archive)");
  }
  return sd.toGenericDict();
}

// {"state": state, "param_groups": groups}: torch's optimizer state dict.
GenericDict optimizer_dict(const GenericDict& state, const GenericList& groups) {
  GenericDict out = string_keyed();
  out.insert("state", state);
  out.insert("param_groups", groups);
  return out;
}

// A group's "params" in one process's form: its parameters' names, in the order the group was given.
c10::List<std::string> group_param_names(const std::vector<std::string>& names) {
  c10::List<std::string> out;
  for (const auto& n : names) {
    if (n.empty()) {
      throw std::invalid_argument(
          "FSDP: the optimizer holds a parameter that is not the model's; a checkpoint of the whole state names "
          "every parameter by its name in the model");
    }
    out.push_back(n);
  }
  return out;
}

// A "step" or other per-parameter scalar that one sharding unit's parameters share.
bool is_replicated_entry(const std::string& key, const c10::IValue& value, const std::vector<int64_t>& shape) {
  return key == "step" || !value.isTensor() || value.toTensor().sizes() != c10::IntArrayRef(shape);
}

}  // namespace

bool FullyShardedDataParallel::is_set_up() const { return impl_->set_up; }

void check_state_dict_type(const std::string& text, const std::string& key) {
  if (text != "full" && text != "sharded")
    throw std::invalid_argument(key + " must be 'full' or 'sharded', got '" + text + "'");
}

namespace {

// This rank's part of `shard_sized` (a flat's shard, or a tensor shaped like it) for parameter `i` of `f`. Under
// NO_SHARD every rank holds everything: rank 0 reports it, the others nothing.
LocalPart part_of(const FlatParam& f, size_t i, const at::Tensor& shard_sized, bool sharded, int64_t rank) {
  LocalPart part;
  part.shape = f.shapes[i];
  part.dtype = shard_sized.scalar_type();
  const int64_t n = c10::multiply_integers(f.shapes[i]);
  const int64_t mine_begin = sharded ? rank * f.shard_numel : 0;
  const int64_t mine_end = sharded || rank == 0 ? mine_begin + f.shard_numel : 0;
  const int64_t lo = std::max(mine_begin, f.offsets[i]), hi = std::min(mine_end, f.offsets[i] + n);
  if (lo >= hi) {
    part.values = at::empty({0}, shard_sized.options());
    return part;
  }
  part.begin = lo - f.offsets[i];
  part.end = hi - f.offsets[i];
  part.values = shard_sized.detach().reshape(-1).narrow(0, lo - mine_begin, hi - lo);
  return part;
}

}  // namespace

std::vector<std::pair<std::string, LocalPart>> FullyShardedDataParallel::local_parameters() const {
  const Impl& m = *impl_;
  std::vector<std::pair<std::string, LocalPart>> out;
  for (const auto& f : m.flats)
    for (size_t i = 0; i < f.params.size(); ++i)
      out.emplace_back(f.names[i], part_of(f, i, f.shard, m.sharded(), m.rank));
  return out;
}

c10::IValue FullyShardedDataParallel::local_optimizer_state_dict(
    const c10::IValue& sharded, std::vector<std::pair<std::vector<std::string>, LocalPart>>& parts) const {
  const Impl& m = *impl_;
  const GenericDict d = indexed_form(sharded, "the optimizer's state dict");
  const GenericDict state = d.at("state").toGenericDict();
  const GenericList groups = d.at("param_groups").toList();
  GenericDict out_state = string_keyed();
  GenericList out_groups(c10::AnyType::get());
  int64_t index = 0;
  for (size_t g = 0; g < groups.size() && g < m.slots.size(); ++g) {
    GenericDict fields = groups.get(g).toGenericDict().copy();
    const c10::List<std::string> names = group_param_names(m.group_names[g]);
    for (const Impl::Slot& slot : m.slots[g]) {
      const auto it = state.find(index++);
      if (it == state.end()) continue;
      if (slot.flat < 0) {
        out_state.insert(slot.name, it->value());
        continue;
      }
      const FlatParam& f = m.flats[static_cast<size_t>(slot.flat)];
      std::vector<GenericDict> per;  // one dict each (copies of a c10::Dict share it)
      for (size_t i = 0; i < f.params.size(); ++i) per.push_back(string_keyed());
      for (const auto& e : it->value().toGenericDict()) {
        const std::string key = e.key().toStringRef();
        const c10::IValue& v = e.value();
        if (v.isTensor() && v.toTensor().dim() == 1 && v.toTensor().numel() == f.shard_numel) {
          for (size_t i = 0; i < f.params.size(); ++i)
            parts.push_back({{f.names[i], key}, part_of(f, i, v.toTensor(), m.sharded(), m.rank)});
        } else {
          for (auto& p : per) p.insert(key, v);
        }
      }
      for (size_t i = 0; i < f.params.size(); ++i) out_state.insert(f.names[i], per[i]);
    }
    fields.insert_or_assign("params", names);
    out_groups.push_back(fields);
  }
  return optimizer_dict(out_state, out_groups);
}

c10::IValue FullyShardedDataParallel::full_optimizer_state_dict(const c10::IValue& sharded) {
  Impl& m = *impl_;
  at::NoGradGuard no_grad;
  const GenericDict d = indexed_form(sharded, "the optimizer's state dict");
  const GenericDict state = d.at("state").toGenericDict();
  const GenericList groups = d.at("param_groups").toList();
  if (groups.size() != m.slots.size())
    throw std::logic_error("FSDP: the optimizer's parameter groups changed after setup()");
  GenericDict out_state = string_keyed();
  GenericList out_groups(c10::AnyType::get());
  int64_t index = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    GenericDict fields = groups.get(g).toGenericDict().copy();
    const c10::List<std::string> names = group_param_names(m.group_names[g]);
    for (const Impl::Slot& slot : m.slots[g]) {
      const auto it = state.find(index++);
      if (slot.flat < 0) {
        if (it != state.end()) out_state.insert(slot.name, it->value());
        continue;
      }
      FlatParam& f = m.flats[static_cast<size_t>(slot.flat)];
      if (it == state.end()) continue;  // no step taken yet: the same on every rank
      std::vector<GenericDict> per;     // one dict each (copies of a c10::Dict share it)
      for (size_t i = 0; i < f.params.size(); ++i) per.push_back(string_keyed());
      for (const auto& e : it->value().toGenericDict()) {  // insertion order: the same on every rank
        const std::string key = e.key().toStringRef();
        const c10::IValue& v = e.value();
        const bool sharded_entry = v.isTensor() && v.toTensor().dim() == 1 && v.toTensor().numel() == f.shard_numel;
        if (!sharded_entry) {
          for (auto& p : per) p.insert(key, v);
          continue;
        }
        const at::Tensor local = v.toTensor().contiguous();
        const at::Tensor whole = m.sharded() ? at::cat(all_gather(local)) : local;
        for (size_t i = 0; i < f.params.size(); ++i) {
          const int64_t n = c10::multiply_integers(f.shapes[i]);
          per[i].insert(key, whole.narrow(0, f.offsets[i], n).view(f.shapes[i]).clone());
        }
      }
      for (size_t i = 0; i < f.params.size(); ++i) out_state.insert(f.names[i], per[i]);
    }
    fields.insert_or_assign("params", names);
    out_groups.push_back(fields);
  }
  return optimizer_dict(out_state, out_groups);
}

c10::IValue FullyShardedDataParallel::shard_optimizer_state_dict(const c10::IValue& full) const {
  const Impl& m = *impl_;
  at::NoGradGuard no_grad;
  const GenericDict d = indexed_form(full, "the checkpoint's optimizer state");
  const GenericDict state = d.at("state").toGenericDict();
  for (const auto& e : state) {
    if (!e.key().isString()) {
      throw std::invalid_argument(
          "FSDP: the checkpoint's optimizer state numbers its parameters instead of naming them (it was saved "
          "from an optimizer holding parameters that are not the model's); it cannot be sharded");
    }
  }
  const GenericList groups = d.at("param_groups").toList();
  if (groups.size() != m.slots.size()) {
    throw std::invalid_argument("FSDP: the checkpoint's optimizer has " + std::to_string(groups.size()) +
                                " parameter groups, this run's has " + std::to_string(m.slots.size()));
  }
  GenericDict out_state(c10::IntType::get(), c10::AnyType::get());
  GenericList out_groups(c10::AnyType::get());
  int64_t index = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    const std::string where = "FSDP: the checkpoint's optimizer param_groups[" + std::to_string(g) + "]";
    GenericDict fields = groups.get(g).toGenericDict().copy();
    std::set<std::string> saved;
    for (const auto& p : fields.at("params").toList()) {
      if (!p.get().isString()) throw std::invalid_argument(where + " numbers its parameters instead of naming them");
      saved.insert(p.get().toStringRef());
    }
    std::set<std::string> mine;
    for (const Impl::Slot& slot : m.slots[g]) {
      if (slot.flat < 0) {
        mine.insert(slot.name);
        continue;
      }
      for (const auto& n : m.flats[static_cast<size_t>(slot.flat)].names) mine.insert(n);
    }
    for (const auto& n : mine)
      if (!saved.count(n)) throw std::invalid_argument(where + " lacks parameter '" + n + "', which this run's has");
    for (const auto& n : saved)
      if (!mine.count(n)) throw std::invalid_argument(where + " has parameter '" + n + "', which this run's lacks");
    c10::List<int64_t> ids;
    for (const Impl::Slot& slot : m.slots[g]) {
      const int64_t i = index++;
      ids.push_back(i);
      if (slot.flat < 0) {
        const auto it = state.find(slot.name);
        if (it != state.end()) out_state.insert(i, it->value());
        continue;
      }
      const FlatParam& f = m.flats[static_cast<size_t>(slot.flat)];
      std::vector<GenericDict> entries;
      for (const auto& n : f.names) {
        const auto it = state.find(n);
        if (it != state.end()) entries.push_back(it->value().toGenericDict());
      }
      if (entries.empty()) continue;
      if (entries.size() != f.names.size()) {
        throw std::invalid_argument(
            "FSDP: the checkpoint has optimizer state for some parameters of the sharding "
            "unit holding '" +
            f.names.front() + "' but not for all; they cannot share one shard");
      }
      GenericDict shard_state = string_keyed();
      const int64_t parts = m.sharded() ? m.world : 1;
      for (const auto& e : entries.front()) {
        const std::string key = e.key().toStringRef();
        for (size_t p = 0; p < entries.size(); ++p) {
          if (!entries[p].contains(key)) {
            throw std::invalid_argument("FSDP: the checkpoint's optimizer state for '" + f.names[p] + "' lacks '" +
                                        key + "', which '" + f.names.front() + "' has");
          }
        }
        if (is_replicated_entry(key, e.value(), f.shapes.front())) {
          for (size_t p = 1; p < entries.size(); ++p) {
            const c10::IValue& other = entries[p].at(key);
            const bool same = e.value().isTensor() && other.isTensor()
                                  ? at::equal(e.value().toTensor(), other.toTensor())
                                  : e.value() == other;
            if (!same) {
              throw std::invalid_argument("FSDP: the checkpoint's optimizer '" + key + "' differs between '" +
                                          f.names.front() + "' and '" + f.names[p] + "', which share a sharding unit");
            }
          }
          shard_state.insert(key, e.value());
          continue;
        }
        const at::Tensor first = e.value().toTensor();
        at::Tensor flat = at::zeros({f.shard_numel * parts}, first.options());
        for (size_t p = 0; p < entries.size(); ++p) {
          const c10::IValue& v = entries[p].at(key);
          if (!v.isTensor() || v.toTensor().sizes() != c10::IntArrayRef(f.shapes[p])) {
            throw std::invalid_argument("FSDP: the checkpoint's optimizer '" + key + "' of '" + f.names[p] +
                                        "' is not shaped like the parameter");
          }
          flat.narrow(0, f.offsets[p], v.toTensor().numel()).copy_(v.toTensor().reshape(-1));
        }
        shard_state.insert(key, m.sharded() ? flat.narrow(0, m.rank * f.shard_numel, f.shard_numel).clone() : flat);
      }
      out_state.insert(i, shard_state);
    }
    fields.insert_or_assign("params", ids);
    out_groups.push_back(fields);
  }
  return optimizer_dict(out_state, out_groups);
}

void FullyShardedDataParallel::keep_gathered_values() {
  Impl& m = *impl_;
  if (!m.sharded()) return;  // the parameters are views of the (whole) shards
  at::NoGradGuard no_grad;
  for (auto& f : m.flats) {
    if (!f.gathered) throw std::logic_error("FSDP: keep_gathered_values() outside a gathered scope");
    f.shard.detach().copy_(f.full.narrow(0, m.rank * f.shard_numel, f.shard_numel));
  }
}

}  // namespace composer::dist
