// The FSDP state in checkpoint form: the optimizer's state over the flat shards to and from one process's
// name-keyed form (whole, gathered; or this rank's parts, for sharded checkpoints), and loaded weights kept.
#include "composer/dist/fully_sharded.h"

#include "composer/dist/dist.h"
#include "dist/detail/fully_sharded_impl.h"
#include "utils/detail/text.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>

namespace composer::dist {

using detail::FlatParam;

namespace {

using GenericDict = c10::impl::GenericDict;
using GenericList = c10::impl::GenericList;

GenericDict string_keyed() { return GenericDict(c10::StringType::get(), c10::AnyType::get()); }

GenericDict indexed_form(const c10::IValue& sd, const char* what) {
  if (!sd.isGenericDict() || !sd.toGenericDict().contains("param_groups")) {
    throw std::invalid_argument(std::string("FSDP: ") + what +
                                " is not in torch's form ({state, param_groups}); under FSDP the optimizer must be "
                                "one of composer::optim's (LibTorch's own optimizers keep an opaque archive)");
  }
  GenericDict d = sd.toGenericDict();
  if (!d.contains("state")) {  // an optimizer without state (SGD without momentum): a DCP checkpoint has no entry
    d = d.copy();
    d.insert("state", GenericDict(c10::AnyType::get(), c10::AnyType::get()));
  }
  return d;
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

// state_dict_type in any case, as the config readers take it.
bool sharded_state_dict(const FSDPOptions& options) {
  return composer::detail::to_lower(options.state_dict_type()) == "sharded";
}

}  // namespace

bool FullyShardedDataParallel::is_set_up() const { return impl_->set_up; }

std::optional<std::string> FullyShardedDataParallel::sharded_checkpoint_prefix() const {
  if (sharded_state_dict(options_)) return options_.sharded_ckpt_prefix_dir();
  return std::nullopt;
}

bool FullyShardedDataParallel::loads_checkpoints_on_rank0_only() const {
  return options_.load_monolith_rank0_only() && !sharded_state_dict(options_);
}

std::optional<std::string> FullyShardedDataParallel::cuda_graph_obstacle() const {
  return std::string("parallelism_config.fsdp gathers weights between the recorded kernels (not supported)");
}

namespace {

using detail::Held;
using detail::held_range;

// Parameter `i` of `f` as a checkpoint holds it: the whole shape (a tensor-parallel part's whole tensor).
std::vector<int64_t> whole_shape(const FlatParam& f, size_t i) {
  std::vector<int64_t> shape = f.shapes[i];
  if (const auto& piece = f.pieces[i]) shape[static_cast<size_t>(piece->dim)] *= piece->degree;
  return shape;
}

// This rank's part of `shard_sized` (a flat's shard, or a tensor shaped like it) for parameter `i` of `f`. Ranks
// that hold what another reports (every rank but 0 under NO_SHARD, the replicas but the first under HYBRID_SHARD)
// report nothing.
LocalPart part_of(const FlatParam& f, size_t i, const at::Tensor& shard_sized, bool sharded, int64_t rank,
                  bool reports) {
  LocalPart part;
  part.shape = whole_shape(f, i);
  part.piece = f.pieces[i];
  part.dtype = shard_sized.scalar_type();
  const Held held = reports ? held_range(f, i, sharded, rank) : Held{};
  if (held.size() == 0) {
    part.values = at::empty({0}, shard_sized.options());
    return part;
  }
  part.begin = held.begin;
  part.end = held.end;
  part.values = shard_sized.detach().reshape(-1).narrow(0, held.in_shard, held.size());
  return part;
}

// Checks that `part` of parameter `i` of `f` is the range this rank holds (what local_parts_wanted asked for).
void check_part(const FlatParam& f, size_t i, const LocalPart& part, const Held& held, const std::string& what) {
  const std::vector<int64_t> whole = whole_shape(f, i);
  if (part.shape != whole) {
    throw std::invalid_argument(what + " has shape " + c10::str(c10::IntArrayRef(part.shape)) +
                                " but the model expects " + c10::str(c10::IntArrayRef(whole)));
  }
  const auto& piece = f.pieces[i];
  if (part.piece.has_value() != piece.has_value() ||
      (piece && (part.piece->dim != piece->dim || part.piece->chunks != piece->chunks ||
                 part.piece->degree != piece->degree || part.piece->rank != piece->rank)))
    throw std::logic_error("FSDP: " + what + " was read for another tensor-parallel rank's piece");
  if (part.end - part.begin != held.size() || (held.size() > 0 && part.begin != held.begin))
    throw std::logic_error("FSDP: " + what + " was read for another rank's range");
}

}  // namespace

std::vector<std::pair<std::string, LocalPart>> FullyShardedDataParallel::local_parameters() const {
  const Impl& m = *impl_;
  std::vector<std::pair<std::string, LocalPart>> out;
  for (const auto& f : m.flats)
    for (size_t i = 0; i < f.params.size(); ++i)
      out.emplace_back(f.names[i], part_of(f, i, f.shard, m.sharded(), m.rank, m.reports_part(f, i)));
  return out;
}

NamedParts FullyShardedDataParallel::held_parameters() {
  const Impl& m = *impl_;
  NamedParts out;
  for (const auto& f : m.flats)
    for (size_t i = 0; i < f.params.size(); ++i)
      out.emplace_back(f.names[i], part_of(f, i, f.shard, m.sharded(), m.rank, /*reports=*/true));
  return out;
}

std::vector<std::pair<std::string, at::Tensor>> FullyShardedDataParallel::gather_held_parts(const NamedParts& parts) {
  Impl& m = *impl_;
  at::NoGradGuard no_grad;
  std::map<std::string, const LocalPart*> by_name;
  for (const auto& [name, part] : parts) by_name[name] = &part;
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& f : m.flats) {
    // This rank's shard of the flat, laid out as the shard is, from the parts (the padding zero); a frozen flat only
    // when its parts are given (the same on every rank: the parts of every parameter, or of the trainable ones).
    if (f.frozen && !by_name.count(f.names[0])) continue;
    at::Tensor shard;
    for (size_t i = 0; i < f.params.size(); ++i) {
      const auto it = by_name.find(f.names[i]);
      if (it == by_name.end())
        throw std::invalid_argument("FSDP: gather_held_parts has no part of parameter '" + f.names[i] + "'");
      const Held held = held_range(f, i, m.sharded(), m.rank);
      check_part(f, i, *it->second, held, "the held part of '" + f.names[i] + "'");
      if (!shard.defined()) shard = at::zeros({f.shard_numel}, it->second->values.options());
      if (held.size() > 0) shard.narrow(0, held.in_shard, held.size()).copy_(it->second->values.reshape(-1));
    }
    if (!shard.defined()) continue;
    const at::Tensor full = m.sharded() ? at::cat(all_gather(shard, m.shard_group)) : shard;
    for (size_t i = 0; i < f.params.size(); ++i)
      out.emplace_back(f.names[i],
                       full.narrow(0, f.offsets[i], c10::multiply_integers(f.shapes[i])).view(f.shapes[i]).clone());
  }
  m.tp_whole_tensors(out);
  return out;
}

std::vector<std::pair<std::string, HeldRange>> FullyShardedDataParallel::local_ranges() const {
  const Impl& m = *impl_;
  std::vector<std::pair<std::string, HeldRange>> out;
  for (const auto& f : m.flats) {
    for (size_t i = 0; i < f.params.size(); ++i) {
      const Held held = held_range(f, i, m.sharded(), m.rank);
      out.emplace_back(f.names[i], HeldRange{whole_shape(f, i), held.begin, held.end, f.pieces[i]});
    }
  }
  return out;
}

void FullyShardedDataParallel::load_local_parameters(const std::vector<std::pair<std::string, LocalPart>>& parts) {
  Impl& m = *impl_;
  at::NoGradGuard no_grad;
  std::map<std::string, const LocalPart*> unused;  // by name, until a sharded parameter takes it
  for (const auto& [name, part] : parts) unused[name] = &part;
  for (auto& f : m.flats) {
    if (f.gathered && m.gathers()) throw std::logic_error("FSDP: load_local_parameters() inside a gathered scope");
    for (size_t i = 0; i < f.params.size(); ++i) {
      const auto it = unused.find(f.names[i]);
      if (it == unused.end()) continue;
      const LocalPart& part = *it->second;
      unused.erase(it);
      const Held held = held_range(f, i, m.sharded(), m.rank);
      check_part(f, i, part, held, "model state '" + f.names[i] + "'");
      if (held.size() > 0) f.shard.detach().narrow(0, held.in_shard, held.size()).copy_(part.values);
    }
  }
  if (!unused.empty())
    throw std::invalid_argument("FSDP: model state '" + unused.begin()->first + "' is not a sharded parameter");
}

c10::IValue FullyShardedDataParallel::Impl::by_parameter_name(const c10::IValue& sharded,
                                                              const SplitEntry& split) const {
  const GenericDict d = indexed_form(sharded, "the optimizer's state dict");
  const GenericDict state = d.at("state").toGenericDict();
  const GenericList groups = d.at("param_groups").toList();
  if (groups.size() != slots.size())
    throw std::logic_error("FSDP: the optimizer's parameter groups changed after setup()");
  GenericDict out_state = string_keyed();
  GenericList out_groups(c10::AnyType::get());
  int64_t index = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    GenericDict fields = groups.get(g).toGenericDict().copy();
    fields.insert_or_assign("params", group_param_names(group_names[g]));
    out_groups.push_back(fields);
    for (const Slot& slot : slots[g]) {
      const auto it = state.find(index++);
      if (it == state.end()) continue;  // no step taken yet: the same on every rank
      if (slot.flat < 0) {
        out_state.insert(slot.name, it->value());
        continue;
      }
      const FlatParam& f = flats[static_cast<size_t>(slot.flat)];
      std::vector<GenericDict> per;  // one dict each (copies of a c10::Dict share it)
      for (size_t i = 0; i < f.params.size(); ++i) per.push_back(string_keyed());
      for (const auto& e : it->value().toGenericDict()) {  // insertion order: the same on every rank
        const std::string key = e.key().toStringRef();
        const c10::IValue& v = e.value();
        if (v.isTensor() && v.toTensor().dim() == 1 && v.toTensor().numel() == f.shard_numel) {
          split(f, key, v.toTensor(), per);
        } else {
          for (auto& p : per) p.insert(key, v);
        }
      }
      for (size_t i = 0; i < f.params.size(); ++i) out_state.insert(f.names[i], per[i]);
    }
  }
  return optimizer_dict(out_state, out_groups);
}

c10::IValue FullyShardedDataParallel::local_optimizer_state_dict(
    const c10::IValue& sharded, std::vector<std::pair<std::vector<std::string>, LocalPart>>& parts) const {
  const Impl& m = *impl_;
  return m.by_parameter_name(
      sharded, [&](const FlatParam& f, const std::string& key, const at::Tensor& entry, std::vector<GenericDict>&) {
        for (size_t i = 0; i < f.params.size(); ++i)
          parts.push_back({{f.names[i], key}, part_of(f, i, entry, m.sharded(), m.rank, m.reports_part(f, i))});
      });
}

c10::IValue FullyShardedDataParallel::full_optimizer_state_dict(const c10::IValue& sharded) {
  const Impl& m = *impl_;
  at::NoGradGuard no_grad;
  return m.tp_whole_entries(m.by_parameter_name(
      sharded, [&](const FlatParam& f, const std::string& key, const at::Tensor& entry, std::vector<GenericDict>& per) {
        const at::Tensor local = entry.contiguous();
        const at::Tensor whole = m.sharded() ? at::cat(all_gather(local, m.shard_group)) : local;
        for (size_t i = 0; i < f.params.size(); ++i) {
          const int64_t n = c10::multiply_integers(f.shapes[i]);
          per[i].insert(key, whole.narrow(0, f.offsets[i], n).view(f.shapes[i]).clone());
        }
      }));
}

namespace {

// The optimizer state entries read in part (a sharded checkpoint), by parameter name and entry key.
class PartsByEntry {
 public:
  explicit PartsByEntry(const EntryParts& parts) {
    for (const auto& [path, part] : parts) {
      if (path.size() != 2) throw std::logic_error("FSDP: an optimizer state part's path is not (parameter, key)");
      by_param_[path[0]].emplace_back(path[1], &part);
    }
  }
  bool has(const std::string& name) const { return by_param_.count(name) > 0; }
  const LocalPart* find(const std::string& name, const std::string& key) const {
    const auto it = by_param_.find(name);
    if (it == by_param_.end()) return nullptr;
    for (const auto& [k, part] : it->second)
      if (k == key) return part;
    return nullptr;
  }
  std::vector<std::string> keys(const std::string& name) const {
    std::vector<std::string> out;
    if (const auto it = by_param_.find(name); it != by_param_.end())
      for (const auto& [k, part] : it->second) out.push_back(k);
    return out;
  }

 private:
  std::map<std::string, std::vector<std::pair<std::string, const LocalPart*>>> by_param_;
};

// The checkpoint's per-parameter state, which must be keyed by name.
GenericDict named_state(const GenericDict& d) {
  const GenericDict state = d.at("state").toGenericDict();
  for (const auto& e : state) {
    if (!e.key().isString()) {
      throw std::invalid_argument(
          "FSDP: the checkpoint's optimizer state numbers its parameters instead of naming them (it was saved "
          "from an optimizer holding parameters that are not the model's); it cannot be sharded");
    }
  }
  return state;
}

// The checkpoint's group `fields` names the same parameters as this run's group (`mine`).
void check_group_params(const std::string& where, const GenericDict& fields, const std::set<std::string>& mine) {
  std::set<std::string> saved;
  for (const auto& p : fields.at("params").toList()) {
    if (!p.get().isString()) throw std::invalid_argument(where + " numbers its parameters instead of naming them");
    saved.insert(p.get().toStringRef());
  }
  for (const auto& n : mine)
    if (!saved.count(n)) throw std::invalid_argument(where + " lacks parameter '" + n + "', which this run's has");
  for (const auto& n : saved)
    if (!mine.count(n)) throw std::invalid_argument(where + " has parameter '" + n + "', which this run's lacks");
}

// A "step" or other scalar entry, which every parameter of the unit must have alike.
c10::IValue shared_entry(const FlatParam& f, const std::vector<GenericDict>& entries, const std::string& key) {
  const c10::IValue& value = entries.front().at(key);
  for (size_t p = 1; p < entries.size(); ++p) {
    const c10::IValue& other = entries[p].at(key);
    const bool same =
        value.isTensor() && other.isTensor() ? at::equal(value.toTensor(), other.toTensor()) : value == other;
    if (!same) {
      throw std::invalid_argument("FSDP: the checkpoint's optimizer '" + key + "' differs between '" + f.names.front() +
                                  "' and '" + f.names[p] + "', which share a sharding unit");
    }
  }
  return value;
}

// This rank's shard of an entry shaped like the parameters, from each parameter's whole tensor or part.
at::Tensor sharded_entry(const FlatParam& f, const std::vector<GenericDict>& entries, const PartsByEntry& parts,
                         const std::string& key, bool sharded, int64_t rank) {
  at::Tensor shard;
  for (size_t p = 0; p < entries.size(); ++p) {
    const LocalPart* part = parts.find(f.names[p], key);
    const std::string what = "the checkpoint's optimizer '" + key + "' of '" + f.names[p] + "'";
    at::Tensor source;  // the parameter's held range of it, flat
    const Held held = held_range(f, p, sharded, rank);
    if (part) {
      check_part(f, p, *part, held, what);
      source = part->values;
    } else {
      const c10::IValue& v = entries[p].at(key);
      if (!v.isTensor() || v.toTensor().sizes() != c10::IntArrayRef(f.shapes[p]))
        throw std::invalid_argument("FSDP: " + what + " is not shaped like the parameter");
      source = v.toTensor().reshape(-1).narrow(0, held.begin, held.size());
    }
    if (!shard.defined()) shard = at::zeros({f.shard_numel}, source.options());
    if (held.size() > 0) shard.narrow(0, held.in_shard, held.size()).copy_(source);
  }
  return shard;
}

// The state of one flat shard from its parameters' entries in the checkpoint; none when they have no state.
std::optional<GenericDict> flat_state(const FlatParam& f, const GenericDict& state, const PartsByEntry& parts,
                                      bool sharded, int64_t rank) {
  std::vector<GenericDict> entries;
  for (const auto& n : f.names) {
    const auto it = state.find(n);
    if (it != state.end()) entries.push_back(it->value().toGenericDict());
  }
  if (entries.empty() && !parts.has(f.names.front())) return std::nullopt;
  if (entries.size() != f.names.size()) {
    throw std::invalid_argument(
        "FSDP: the checkpoint has optimizer state for some parameters of the sharding unit "
        "holding '" +
        f.names.front() + "' but not for all; they cannot share one shard");
  }
  GenericDict out = string_keyed();
  // The keys: the first parameter's entries, then those read in part.
  std::vector<std::string> keys;
  for (const auto& e : entries.front()) keys.push_back(e.key().toStringRef());
  for (const auto& k : parts.keys(f.names.front())) keys.push_back(k);
  for (const std::string& key : keys) {
    for (size_t p = 0; p < entries.size(); ++p) {
      if (!entries[p].contains(key) && !parts.find(f.names[p], key)) {
        throw std::invalid_argument("FSDP: the checkpoint's optimizer state for '" + f.names[p] + "' lacks '" + key +
                                    "', which '" + f.names.front() + "' has");
      }
    }
    if (!parts.find(f.names.front(), key) && is_replicated_entry(key, entries.front().at(key), f.shapes.front()))
      out.insert(key, shared_entry(f, entries, key));
    else
      out.insert(key, sharded_entry(f, entries, parts, key, sharded, rank));
  }
  return out;
}

}  // namespace

c10::IValue FullyShardedDataParallel::shard_optimizer_state_dict(const c10::IValue& full,
                                                                 const EntryParts& parts) const {
  const Impl& m = *impl_;
  const PartsByEntry parts_by_entry(parts);
  at::NoGradGuard no_grad;
  const GenericDict d = indexed_form(m.tp_local_entries(full), "the checkpoint's optimizer state");
  const GenericDict state = named_state(d);
  const GenericList groups = d.at("param_groups").toList();
  if (groups.size() != m.slots.size()) {
    throw std::invalid_argument("FSDP: the checkpoint's optimizer has " + std::to_string(groups.size()) +
                                " parameter groups, this run's has " + std::to_string(m.slots.size()));
  }
  GenericDict out_state(c10::IntType::get(), c10::AnyType::get());
  GenericList out_groups(c10::AnyType::get());
  int64_t index = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    GenericDict fields = groups.get(g).toGenericDict().copy();
    std::set<std::string> mine;
    for (const Impl::Slot& slot : m.slots[g]) {
      if (slot.flat < 0) mine.insert(slot.name);
      if (slot.flat >= 0)
        for (const auto& n : m.flats[static_cast<size_t>(slot.flat)].names) mine.insert(n);
    }
    check_group_params("FSDP: the checkpoint's optimizer param_groups[" + std::to_string(g) + "]", fields, mine);
    c10::List<int64_t> ids;
    for (const Impl::Slot& slot : m.slots[g]) {
      const int64_t i = index++;
      ids.push_back(i);
      if (slot.flat < 0) {
        if (const auto it = state.find(slot.name); it != state.end()) out_state.insert(i, it->value());
        continue;
      }
      const auto flat = flat_state(m.flats[static_cast<size_t>(slot.flat)], state, parts_by_entry, m.sharded(), m.rank);
      if (flat) out_state.insert(i, *flat);
    }
    fields.insert_or_assign("params", ids);
    out_groups.push_back(fields);
  }
  return optimizer_dict(out_state, out_groups);
}

void FullyShardedDataParallel::keep_gathered_values() {
  Impl& m = *impl_;
  m.tp_restore_local(/*keep=*/true);  // the whole split parameters' values into this rank's parts first
  if (!m.gathers()) return;           // the parameters are views of the (whole) shards
  at::NoGradGuard no_grad;
  for (auto& f : m.flats) {
    if (!f.gathered) throw std::logic_error("FSDP: keep_gathered_values() outside a gathered scope");
    const at::Tensor& gathered = f.in_full_state ? f.full_state : f.full;
    f.shard.detach().copy_(gathered.narrow(0, m.sharded() ? m.rank * f.shard_numel : 0, f.shard_numel));
  }
}

}  // namespace composer::dist
