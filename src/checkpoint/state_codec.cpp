#include "composer/checkpoint/state_codec.h"

#include "composer/core/algorithm.h"
#include "composer/core/callback.h"
#include "composer/core/serialization.h"
#include "composer/core/state.h"
#include "composer/dist/env.h"
#include "composer/dist/sharded_state.h"
#include "composer/dist/strategy.h"
#include "composer/metrics/metric.h"
#include "composer/models/composer_model.h"
#include "composer/optim/grad_scaler.h"
#include "composer/optim/optimizer.h"
#include "composer/optim/scheduler.h"
#include "composer/utils/compat.h"
#include "composer/utils/type_name.h"
#include "composer/version.h"

#include <torch/torch.h>

#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

namespace composer {
namespace {

Dict timestamp_to_dict(const Timestamp& t) {
  Dict d = new_dict();
  d.insert("iteration", t.iteration);
  d.insert("epoch", t.epoch);
  d.insert("batch", t.batch);
  d.insert("sample", t.sample);
  d.insert("token", t.token);
  d.insert("epoch_in_iteration", t.epoch_in_iteration);
  d.insert("token_in_iteration", t.token_in_iteration);
  d.insert("batch_in_epoch", t.batch_in_epoch);
  d.insert("sample_in_epoch", t.sample_in_epoch);
  d.insert("token_in_epoch", t.token_in_epoch);
  // Composer keeps these four as datetime.timedelta, which a plain torch.load(weights_only=True) refuses and a float
  // would break in Composer's arithmetic; so they travel as seconds under their own keys (Composer ignores them).
  d.insert("total_wct_seconds", t.total_wct.count());
  d.insert("iteration_wct_seconds", t.iteration_wct.count());
  d.insert("epoch_wct_seconds", t.epoch_wct.count());
  d.insert("batch_wct_seconds", t.batch_wct.count());
  return d;
}

// `<key>_seconds` (ours), else `<key>` in seconds (a Composer checkpoint's timedelta, or our older files), else 0.
Seconds wall_clock(const Dict& d, const std::string& key) {
  if (d.contains(key + "_seconds")) return Seconds(d.at(key + "_seconds").toDouble());
  if (d.contains(key)) return Seconds(d.at(key).toDouble());
  return Seconds(0);
}

Timestamp timestamp_from_dict(const Dict& d) {
  const std::string what = "state_dict timestamp";
  Timestamp t;
  t.iteration = dict_get(d, "iteration", what).toInt();
  t.epoch = dict_get(d, "epoch", what).toInt();
  t.batch = dict_get(d, "batch", what).toInt();
  t.sample = dict_get(d, "sample", what).toInt();
  t.token = dict_get(d, "token", what).toInt();
  t.epoch_in_iteration = dict_get(d, "epoch_in_iteration", what).toInt();
  t.token_in_iteration = dict_get(d, "token_in_iteration", what).toInt();
  t.batch_in_epoch = dict_get(d, "batch_in_epoch", what).toInt();
  t.sample_in_epoch = dict_get(d, "sample_in_epoch", what).toInt();
  t.token_in_epoch = dict_get(d, "token_in_epoch", what).toInt();
  t.total_wct = wall_clock(d, "total_wct");
  t.iteration_wct = wall_clock(d, "iteration_wct");
  t.epoch_wct = wall_clock(d, "epoch_wct");
  t.batch_wct = wall_clock(d, "batch_wct");
  return t;
}

// `clone`: copies, for parameters that hold their values only while gathered.
Dict model_state_dict(torch::nn::Module& model, bool clone) {
  Dict d(c10::StringType::get(), c10::TensorType::get());
  for (const auto& p : model.named_parameters())
    d.insert(p.key(), clone ? p.value().detach().clone() : p.value().detach());
  for (const auto& b : model.named_buffers()) d.insert(b.key(), b.value().detach());
  return d;
}

// What the strategy holds of the state on this rank, once it has split it; nullptr when the model and optimizer are
// whole (a replicated strategy, or a sharded one before its setup).
dist::ShardedState* sharded_by(const State& state) {
  return state.strategy ? state.strategy->sharded_state() : nullptr;
}

// The whole weights gathered into the module while the scope lives (nothing to do when they are whole).
std::unique_ptr<dist::PhaseScope> gather_if_split(const State& state, const dist::ShardedState* held) {
  return held ? state.strategy->gather_full_weights() : nullptr;
}

std::invalid_argument shape_mismatch(const std::string& name, at::IntArrayRef saved, at::IntArrayRef expected) {
  std::ostringstream os;
  os << "model state '" << name << "' has shape " << saved << " but the model expects " << expected;
  return std::invalid_argument(os.str());
}

// `elsewhere`: parameters that load from this rank's parts instead (skipped here, and missing unless a part of them
// was read: true).
void load_model_state(torch::nn::Module& model, const Dict& saved, bool strict,
                      const std::map<std::string, bool>& elsewhere = {}) {
  at::NoGradGuard no_grad;
  std::set<std::string> used;
  std::vector<std::string> missing;
  auto load_one = [&](const std::string& name, at::Tensor& target) {
    if (const auto e = elsewhere.find(name); e != elsewhere.end()) {
      if (!e->second) missing.push_back(name);
      return;
    }
    auto it = saved.find(name);
    if (it == saved.end()) {
      missing.push_back(name);
      return;
    }
    const at::Tensor src = it->value().toTensor();
    if (src.sizes() != target.sizes()) throw shape_mismatch(name, src.sizes(), target.sizes());
    target.copy_(src);
    used.insert(name);
  };
  for (auto& p : model.named_parameters()) load_one(p.key(), p.value());
  for (auto& b : model.named_buffers()) load_one(b.key(), b.value());
  if (!strict) return;
  std::vector<std::string> unexpected;
  for (const auto& e : saved)
    if (!used.count(e.key().toStringRef())) unexpected.push_back(e.key().toStringRef());
  if (!missing.empty() || !unexpected.empty()) {
    std::ostringstream os;
    os << "model state does not match the model (strict):";
    if (!missing.empty()) {
      os << " missing keys:";
      for (const auto& k : missing) os << " " << k;
    }
    if (!unexpected.empty()) {
      os << (missing.empty() ? "" : ";") << " unexpected keys:";
      for (const auto& k : unexpected) os << " " << k;
    }
    throw std::invalid_argument(os.str());
  }
}

// Composer keys an optimizer's state by parameter name (torch.distributed.checkpoint's get_optimizer_state_dict):
// "state" {name: {...}} and each group's "params" [names]. Our optimizers number parameters across their groups, as
// torch.optim does; these translate between the two with the model's parameter names. Empty when some parameter
// is not the model's (then the numbered form is kept).
std::vector<std::string> optimizer_param_names(const torch::optim::Optimizer& opt, torch::nn::Module& model) {
  std::unordered_map<const c10::TensorImpl*, std::string> by_impl;
  for (const auto& p : model.named_parameters()) by_impl.emplace(p.value().unsafeGetTensorImpl(), p.key());
  std::vector<std::string> names;
  for (const auto& g : opt.param_groups()) {
    for (const auto& p : g.params()) {
      auto it = by_impl.find(p.unsafeGetTensorImpl());
      if (it == by_impl.end()) return {};
      names.push_back(it->second);
    }
  }
  return names;
}

bool is_indexed_optimizer_state(const c10::IValue& sd) {
  return sd.isGenericDict() && sd.toGenericDict().contains("state") && sd.toGenericDict().contains("param_groups");
}

// `d` with the keys of its "state" and the entries of each group's "params" mapped by `key`.
c10::IValue remap_params(const Dict& d, const c10::TypePtr& key_type,
                         const std::function<c10::IValue(const c10::IValue&)>& key) {
  Dict state(key_type, c10::AnyType::get());
  for (const auto& e : d.at("state").toGenericDict()) state.insert(key(e.key()), e.value());
  c10::impl::GenericList groups(c10::AnyType::get());
  for (const auto& g : d.at("param_groups").toList()) {
    Dict fields = g.get().toGenericDict().copy();
    c10::impl::GenericList params(c10::AnyType::get());
    for (const auto& p : fields.at("params").toList()) params.push_back(key(p.get()));
    fields.insert_or_assign("params", params);
    groups.push_back(fields);
  }
  Dict out = d.copy();
  out.insert_or_assign("state", state);
  out.insert_or_assign("param_groups", groups);
  return out;
}

c10::IValue with_param_names(const c10::IValue& sd, const std::vector<std::string>& names) {
  if (names.empty() || !is_indexed_optimizer_state(sd)) return sd;
  return remap_params(sd.toGenericDict(), c10::StringType::get(),
                      [&](const c10::IValue& i) -> c10::IValue { return names.at(static_cast<size_t>(i.toInt())); });
}

// The inverse for name-keyed state (Composer's checkpoints and ours); numbered state passes through.
c10::IValue with_param_indices(const c10::IValue& sd, const std::vector<std::string>& names, const std::string& what) {
  if (!is_indexed_optimizer_state(sd)) return sd;
  const Dict d = sd.toGenericDict();
  bool named = false;
  for (const auto& e : d.at("state").toGenericDict()) named = named || e.key().isString();
  for (const auto& g : d.at("param_groups").toList()) {
    for (const auto& p : g.get().toGenericDict().at("params").toList()) named = named || p.get().isString();
  }
  if (!named) return sd;
  if (names.empty())
    throw std::invalid_argument(what + " names its parameters, but this optimizer holds parameters the model does not");
  std::unordered_map<std::string, int64_t> index;
  for (size_t i = 0; i < names.size(); ++i) index.emplace(names[i], static_cast<int64_t>(i));
  return remap_params(d, c10::IntType::get(), [&](const c10::IValue& name) -> c10::IValue {
    auto it = index.find(name.toStringRef());
    if (it == index.end()) {
      throw std::invalid_argument(what + " has state for parameter '" + name.toStringRef() +
                                  "', which this model's optimizer does not hold");
    }
    return it->second;
  });
}

}  // namespace

bool state_dict_is_collective(const State& state) { return sharded_by(state) != nullptr; }

namespace {

// state_dict(), or with `sharded` (under a sharded strategy) local_state_dict().
c10::IValue make_state_dict(const State& state, std::vector<ShardedEntry>* sharded) {
  Dict d = new_dict();
  dist::ShardedState* held = sharded_by(state);
  if (!held) sharded = nullptr;
  if (state.model && sharded) {
    Dict model(c10::StringType::get(), c10::TensorType::get());
    std::set<std::string> parted;
    for (auto& [name, part] : held->local_parameters()) {
      parted.insert(name);
      sharded->push_back({{"model", name}, std::move(part)});
    }
    for (const auto& p : state.model->named_parameters())
      if (!parted.count(p.key())) model.insert(p.key(), p.value().detach());
    for (const auto& b : state.model->named_buffers()) model.insert(b.key(), b.value().detach());
    d.insert("model", model);
  } else if (state.model) {
    const auto gathered = gather_if_split(state, held);
    d.insert("model", model_state_dict(*state.model, held != nullptr));
  }
  if (state.optimizer) {
    Dict opts = new_dict();
    const c10::IValue saved = optim::optimizer_state_dict(*state.optimizer);
    const std::string cls = class_name_of(optim::checkpointed_optimizer(*state.optimizer));
    if (sharded) {
      dist::EntryParts parts;
      opts.insert(cls, held->local_optimizer_state_dict(saved, parts));
      for (auto& [path, part] : parts) {
        std::vector<std::string> full{"optimizers", cls, "state"};
        full.insert(full.end(), path.begin(), path.end());
        sharded->push_back({std::move(full), std::move(part)});
      }
    } else {
      const auto names =
          state.model ? optimizer_param_names(*state.optimizer, *state.model) : std::vector<std::string>{};
      opts.insert(cls, held ? held->full_optimizer_state_dict(saved) : with_param_names(saved, names));
    }
    d.insert("optimizers", opts);
  }
  c10::impl::GenericList algos(c10::AnyType::get());
  for (const auto& a : state.algorithms) algos.push_back(c10::ivalue::Tuple::create({a->name(), a->state_dict()}));
  d.insert("algorithms", algos);
  Dict cbs = new_dict();
  for (const auto& c : state.callbacks) cbs.insert(c->name(), c->state_dict());
  d.insert("callbacks", cbs);
  if (state.scaler) {
    Dict sc = new_dict();
    sc.insert("GradScaler", state.scaler->state_dict());
    d.insert("scaler", sc);
  }
  Dict ts = new_dict();
  ts.insert("Timestamp", timestamp_to_dict(state.timestamp));
  d.insert("timestamp", ts);
  Dict metrics = new_dict();
  for (const auto& [name, m] : state.train_metrics) {
    metrics.insert(name, m->state().to(at::kCPU));
    if (m->row_width() > 0) metrics.insert(name + ":rows", m->rows().to(at::kCPU));  // a list state
  }
  d.insert("train_metrics", metrics);
  d.insert("rank_zero_seed", static_cast<int64_t>(state.rank_zero_seed));
  d.insert("run_name", state.run_name);
  if (!state.scheduler_base_lrs.empty()) d.insert("scheduler_base_lrs", c10::List<double>(state.scheduler_base_lrs));
  Dict meta = new_dict();
  meta.insert("composer_cpp_version", std::string(COMPOSER_VERSION_STRING));
  meta.insert("torch_version", compat::torch_version());
  meta.insert("device", state.device.str());
  meta.insert("precision", std::string(to_string(state.precision)));
  meta.insert("world_size", dist::get_world_size());
  meta.insert("train_batch_size", state.train_dataloader ? state.train_dataloader->batch_size() : int64_t{0});
  meta.insert("device_train_microbatch_size", state.device_train_microbatch_size);
  // The schedules as reprs from their field lists (the run re-creates them from its config; this records them).
  c10::impl::GenericList schedulers(c10::StringType::get());
  for (const auto& sch : state.schedulers) schedulers.push_back(sch->repr());
  meta.insert("schedulers", schedulers);
  d.insert("metadata", meta);
  return d;
}

// The lrs the schedules scale: ours ("scheduler_base_lrs"), or the base_lrs of the LambdaLR a Composer checkpoint
// holds ("schedulers": {"LambdaLR": {"base_lrs": [...]}}).
std::optional<std::vector<double>> saved_scheduler_base_lrs(const Dict& d) {
  c10::IValue list;
  if (d.contains("scheduler_base_lrs")) {
    list = d.at("scheduler_base_lrs");
  } else if (d.contains("schedulers") && d.at("schedulers").isGenericDict()) {
    const Dict schedulers = d.at("schedulers").toGenericDict();
    if (!schedulers.contains("LambdaLR") || !schedulers.at("LambdaLR").isGenericDict()) return std::nullopt;
    const Dict lambda = schedulers.at("LambdaLR").toGenericDict();
    if (!lambda.contains("base_lrs")) return std::nullopt;
    list = lambda.at("base_lrs");
  } else {
    return std::nullopt;
  }
  if (!list.isList()) throw std::invalid_argument("load_state_dict: the scheduler base lrs must be a list of numbers");
  std::vector<double> lrs;
  for (const auto& v : list.toList()) {
    const c10::IValue x = v.get();
    if (!x.isDouble() && !x.isInt())
      throw std::invalid_argument("load_state_dict: the scheduler base lrs must be a list of numbers");
    lrs.push_back(x.isDouble() ? x.toDouble() : static_cast<double>(x.toInt()));
  }
  return lrs;
}

}  // namespace

c10::IValue state_dict(const State& state) { return make_state_dict(state, nullptr); }

c10::IValue local_state_dict(const State& state, std::vector<ShardedEntry>& sharded) {
  return make_state_dict(state, &sharded);
}

PartsWanted local_parts_wanted(const State& state) {
  dist::ShardedState* held = sharded_by(state);
  if (!held) return {};
  std::map<std::string, dist::HeldRange> ranges;
  for (auto& [name, range] : held->local_ranges()) ranges.emplace(name, std::move(range));
  const std::string cls =
      state.optimizer ? class_name_of(optim::checkpointed_optimizer(*state.optimizer)) : std::string();
  return [ranges = std::move(ranges), cls](const std::vector<std::string>& path,
                                           const std::vector<int64_t>& shape) -> std::optional<WantedPart> {
    // {"model", name} or {"optimizers", cls, "state", name, key}; "step" and tensors of another shape are whole.
    const bool model = path.size() == 2 && path[0] == "model";
    const bool optimizer = !cls.empty() && path.size() == 5 && path[0] == "optimizers" && path[1] == cls &&
                           path[2] == "state" && path[4] != "step";
    if (!model && !optimizer) return std::nullopt;
    const auto it = ranges.find(model ? path[1] : path[3]);
    if (it == ranges.end() || it->second.shape != shape) return std::nullopt;
    return WantedPart({it->second.begin, it->second.end}, it->second.piece);
  };
}

namespace {

// The parts, as the strategy takes them (local_parts_wanted asked for these paths only).
void split_parts(const std::vector<ShardedEntry>& parts, dist::NamedParts& model, dist::EntryParts& optimizer) {
  for (const auto& e : parts) {
    if (e.path.size() == 2 && e.path[0] == "model")
      model.emplace_back(e.path[1], e.part);
    else if (e.path.size() == 5 && e.path[0] == "optimizers" && e.path[2] == "state")
      optimizer.push_back({{e.path[3], e.path[4]}, e.part});
    else
      throw std::logic_error("load_state_dict: a part at an unexpected path");
  }
}

}  // namespace

void load_state_dict(State& state, const c10::IValue& saved, bool strict_model,
                     const std::vector<ShardedEntry>& parts) {
  if (!saved.isGenericDict()) throw std::invalid_argument("load_state_dict: the state must be a dict");
  const Dict d = saved.toGenericDict();
  dist::ShardedState* held = sharded_by(state);
  if (!parts.empty() && !held)
    throw std::logic_error("load_state_dict: parts of tensors given, but the strategy holds the state whole");
  dist::NamedParts model_parts;
  dist::EntryParts optimizer_parts;
  split_parts(parts, model_parts, optimizer_parts);
  if (state.model && !parts.empty()) {
    // Read in part: each rank writes its parts into its shards; no collective, nothing gathered.
    const Dict model =
        d.contains("model") ? d.at("model").toGenericDict() : Dict(c10::StringType::get(), c10::TensorType::get());
    std::map<std::string, bool> elsewhere;  // every sharded parameter: whether a part of it was read
    for (const auto& [name, range] : held->local_ranges()) {
      const auto it = model.find(name);  // read whole: its shape is not the parameter's
      if (it != model.end()) throw shape_mismatch(name, it->value().toTensor().sizes(), range.shape);
      elsewhere[name] = false;
    }
    for (const auto& [name, part] : model_parts) elsewhere[name] = true;
    load_model_state(*state.model, model, strict_model, elsewhere);
    held->load_local_parameters(model_parts);
  } else if (state.model && d.contains("model")) {
    // Sharded: the whole weights load into the gathered parameters, and each rank keeps its part.
    const auto gathered = gather_if_split(state, held);
    load_model_state(*state.model, d.at("model").toGenericDict(), strict_model);
    if (held) held->keep_gathered_values();
  }
  if (d.contains("optimizers") && state.optimizer) {
    const Dict opts = d.at("optimizers").toGenericDict();
    const std::string key = class_name_of(optim::checkpointed_optimizer(*state.optimizer));
    if (!opts.contains(key))
      throw std::invalid_argument("load_state_dict: no state for optimizer " + key + " in the checkpoint");
    if (held) {
      optim::load_optimizer_state_dict(*state.optimizer,
                                       held->shard_optimizer_state_dict(opts.at(key), optimizer_parts));
    } else {
      const auto names =
          state.model ? optimizer_param_names(*state.optimizer, *state.model) : std::vector<std::string>{};
      optim::load_optimizer_state_dict(*state.optimizer,
                                       with_param_indices(opts.at(key), names, "the " + key + " state"));
    }
  }
  if (d.contains("algorithms")) {
    for (const auto& entry : d.at("algorithms").toList()) {
      const auto tuple = entry.get().toTuple();
      const std::string name = tuple->elements().at(0).toStringRef();
      for (auto& a : state.algorithms)
        if (a->name() == name) a->load_state_dict(tuple->elements().at(1));
    }
  }
  if (d.contains("callbacks")) {
    const Dict cbs = d.at("callbacks").toGenericDict();
    for (auto& c : state.callbacks)
      if (cbs.contains(c->name())) c->load_state_dict(cbs.at(c->name()));
  }
  if (d.contains("scaler") && state.scaler) {
    state.scaler->load_state_dict(dict_get(d.at("scaler").toGenericDict(), "GradScaler", "scaler"));
  }
  if (d.contains("timestamp")) {
    state.timestamp =
        timestamp_from_dict(dict_get(d.at("timestamp").toGenericDict(), "Timestamp", "timestamp").toGenericDict());
  }
  if (d.contains("train_metrics")) {
    const Dict metrics = d.at("train_metrics").toGenericDict();
    for (auto& [name, m] : state.train_metrics) {
      if (metrics.contains(name)) m->set_state(metrics.at(name).toTensor());
      if (m->row_width() > 0 && metrics.contains(name + ":rows")) m->set_rows(metrics.at(name + ":rows").toTensor());
    }
  }
  if (d.contains("rank_zero_seed")) state.rank_zero_seed = static_cast<uint64_t>(d.at("rank_zero_seed").toInt());
  if (d.contains("run_name")) state.run_name = d.at("run_name").toStringRef();
  if (auto base = saved_scheduler_base_lrs(d)) state.scheduler_base_lrs = std::move(*base);
}

}  // namespace composer
