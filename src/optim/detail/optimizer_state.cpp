#include "optim/detail/optimizer_state.h"

#include <stdexcept>

namespace composer::optim::detail {

void for_each_param(const std::vector<torch::optim::OptimizerParamGroup>& groups,
                    const std::function<void(size_t, const at::Tensor&)>& fn) {
  size_t index = 0;
  for (const auto& g : groups)
    for (const auto& p : g.params()) fn(index++, p);
}

c10::IValue make_state_dict(const std::vector<torch::optim::OptimizerParamGroup>& groups,
                            const std::function<c10::optional<Dict>(const at::Tensor&)>& per_param,
                            const std::function<Dict(const torch::optim::OptimizerOptions&)>& group_fields) {
  Dict state(c10::IntType::get(), c10::AnyType::get());
  for_each_param(groups, [&](size_t i, const at::Tensor& p) {
    if (auto entry = per_param(p)) state.insert(static_cast<int64_t>(i), *entry);
  });
  c10::impl::GenericList param_groups(c10::AnyType::get());
  size_t index = 0;
  for (const auto& g : groups) {
    Dict fields = group_fields(g.options());
    c10::List<int64_t> ids;
    for (size_t k = 0; k < g.params().size(); ++k) ids.push_back(static_cast<int64_t>(index++));
    fields.insert("params", ids);
    param_groups.push_back(fields);
  }
  Dict out = new_dict();
  out.insert("state", state);
  out.insert("param_groups", param_groups);
  return out;
}

void load_state_dict(const std::string& optimizer, std::vector<torch::optim::OptimizerParamGroup>& groups,
                     const c10::IValue& state, const std::function<void(const at::Tensor&, const Dict&)>& load,
                     const std::function<void(torch::optim::OptimizerOptions&, const Dict&)>& load_group) {
  if (!state.isGenericDict()) throw std::invalid_argument(optimizer + " state_dict must be a dict");
  const Dict d = state.toGenericDict();
  const auto saved_groups = dict_get(d, "param_groups", optimizer + " state_dict").toList();
  if (saved_groups.size() != groups.size()) {
    throw std::invalid_argument(optimizer + " state_dict has " + std::to_string(saved_groups.size()) +
                                " parameter groups, the optimizer has " + std::to_string(groups.size()));
  }
  for (size_t g = 0; g < groups.size(); ++g) {
    const Dict fields = saved_groups.get(g).toGenericDict();
    const auto n = dict_get(fields, "params", optimizer + " param_groups[" + std::to_string(g) + "]").toList().size();
    if (n != groups[g].params().size()) {
      throw std::invalid_argument(optimizer + " param_groups[" + std::to_string(g) + "] has " + std::to_string(n) +
                                  " parameters, the optimizer has " + std::to_string(groups[g].params().size()));
    }
    load_group(groups[g].options(), fields);
  }
  const Dict per_param = dict_get(d, "state", optimizer + " state_dict").toGenericDict();
  for_each_param(groups, [&](size_t i, const at::Tensor& p) {
    auto it = per_param.find(static_cast<int64_t>(i));
    if (it != per_param.end()) load(p, it->value().toGenericDict());
  });
}

void read_group_value(const c10::IValue& v, std::tuple<double, double>& out, const std::string& what) {
  const auto elements = v.isTuple()  ? v.toTupleRef().elements().vec()
                        : v.isList() ? v.toListRef().vec()
                                     : std::vector<c10::IValue>{};
  if (elements.size() != 2) throw std::invalid_argument(what + " must be a pair of numbers, got " + v.tagKind());
  out = {elements[0].toDouble(), elements[1].toDouble()};
}

}  // namespace composer::optim::detail
