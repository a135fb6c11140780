// Shared pieces of the decoupled optimizers: parameter indexing and Python-style state dicts.
#pragma once

#include "composer/core/serialization.h"

#include <torch/optim/optimizer.h>

#include <functional>
#include <iostream>
#include <string>
#include <tuple>
#include <vector>

namespace composer::optim::detail {

/// Validates each group's options, records initial_lr (the lr when the group was created) and warns about a weight
/// decay that is large for decoupled decay.
template <class Options>
void init_decoupled_groups(std::vector<torch::optim::OptimizerParamGroup>& groups, const char* optimizer) {
  for (auto& g : groups) {
    auto& o = static_cast<Options&>(g.options());
    o.validate();
    if (o.initial_lr() <= 0) o.initial_lr(o.lr());
    if (o.weight_decay() >= 1e-3) {
      std::cerr << "composer: " << optimizer << " weight_decay=" << o.weight_decay()
                << " is large; decoupled decay is not multiplied by the lr (1e-5..1e-4 is typical)\n";
    }
  }
}

/// Composer's decoupled decay multiplier lr / initial_lr, and 1 for a group created with lr 0 (so such a group decays
/// by 1 - weight_decay each step, as in Composer, instead of dividing by zero).
template <class Options>
double decay_factor(const Options& o) {
  return o.initial_lr() != 0 ? o.lr() / o.initial_lr() : 1.0;
}

/// Each group's initial_lr (the lr the group was created with).
template <class Options>
std::vector<double> initial_lrs_of(const std::vector<torch::optim::OptimizerParamGroup>& groups) {
  std::vector<double> lrs;
  for (const auto& g : groups) lrs.push_back(static_cast<const Options&>(g.options()).initial_lr());
  return lrs;
}

/// Visits every parameter with its global index (Python's state_dict numbering across groups).
void for_each_param(const std::vector<torch::optim::OptimizerParamGroup>& groups,
                    const std::function<void(size_t index, const at::Tensor& param)>& fn);

/// {"state": {index: per_param(index, param) for params with state}, "param_groups": [group_fields + "params"]}.
c10::IValue make_state_dict(const std::vector<torch::optim::OptimizerParamGroup>& groups,
                            const std::function<c10::optional<Dict>(const at::Tensor& param)>& per_param,
                            const std::function<Dict(const torch::optim::OptimizerOptions& options)>& group_fields);

/// Checks the group count and sizes against `state` and calls `load(param, entry)` for each param with state
/// and `load_group(options, fields)` for each group. Errors name `optimizer` and what differs.
void load_state_dict(const std::string& optimizer, std::vector<torch::optim::OptimizerParamGroup>& groups,
                     const c10::IValue& state, const std::function<void(const at::Tensor&, const Dict&)>& load,
                     const std::function<void(torch::optim::OptimizerOptions&, const Dict&)>& load_group);

/// A group hyperparameter as Python keeps it in param_groups (a float, a bool, a tuple of floats for betas), and
/// back; `what` names the group in errors.
inline c10::IValue group_value(double v) { return v; }
inline c10::IValue group_value(bool v) { return v; }
inline c10::IValue group_value(const std::tuple<double, double>& v) {
  return c10::ivalue::Tuple::create({std::get<0>(v), std::get<1>(v)});
}
inline void read_group_value(const c10::IValue& v, double& out, const std::string&) { out = v.toDouble(); }
inline void read_group_value(const c10::IValue& v, bool& out, const std::string&) { out = v.toBool(); }
void read_group_value(const c10::IValue& v, std::tuple<double, double>& out, const std::string& what);

/// A group's entry of Python's param_groups: every field of Options' field list, then initial_lr (the decoupled
/// optimizers' group keys, as Composer writes them).
template <class Options>
Dict group_fields(const torch::optim::OptimizerOptions& options) {
  const auto& o = static_cast<const Options&>(options);
  Dict d = new_dict();
  Options::for_each_field(o,
                          [&](const char* key, const auto& value, const char*) { d.insert(key, group_value(value)); });
  d.insert("initial_lr", o.initial_lr());
  return d;
}

/// Sets each field of Options' field list and initial_lr from a param_groups entry; errors name `optimizer`.
template <class Options>
void load_group_fields(torch::optim::OptimizerOptions& options, const Dict& d, const std::string& optimizer) {
  auto& o = static_cast<Options&>(options);
  const std::string what = optimizer + " param group";
  Options::for_each_field(o, [&](const char* key, auto& value, const char*) {
    read_group_value(dict_get(d, key, what), value, what + " '" + key + "'");
  });
  o.initial_lr(dict_get(d, "initial_lr", what).toDouble());
}

}  // namespace composer::optim::detail
