#include "algorithms/detail/held_weights.h"

#include "composer/core/state.h"
#include "composer/models/composer_model.h"

#include <c10/util/Exception.h>

#include <set>
#include <stdexcept>

namespace composer::algorithms::detail {

HeldWeights held_weights(const State& state, bool frozen_too) {
  HeldWeights held;
  if (!state.model) return held;
  held.sharded = state.strategy ? state.strategy->sharded_state() : nullptr;
  std::set<std::string> parted;
  if (held.sharded) {
    held.parts = held.sharded->held_parameters();
    for (const auto& [name, part] : held.parts) {
      held.parameters.emplace_back(name, part.values);
      parted.insert(name);
    }
  }
  for (const auto& item : state.model->named_parameters()) {
    if (parted.count(item.key())) continue;
    // Unsharded, every trainable parameter; sharded, the strategy left only frozen ones whole.
    if (frozen_too || (!held.sharded && item.value().requires_grad()))
      held.parameters.emplace_back(item.key(), item.value());
  }
  for (const auto& item : state.model->named_buffers()) held.buffers.emplace_back(item.key(), item.value());
  return held;
}

std::map<std::string, at::Tensor> parts_of(const HeldWeights& held, const std::map<std::string, at::Tensor>& whole,
                                           const std::string& what) {
  std::map<std::string, at::Tensor> out = whole;
  for (const auto& [name, part] : held.parts) {
    const auto it = whole.find(name);
    if (it == whole.end())
      throw std::invalid_argument(what + " has no '" + name + "' (a checkpoint of another model?)");
    if (it->second.sizes() != c10::IntArrayRef(part.shape)) {
      throw std::invalid_argument(what + ": '" + name + "' has shape " + c10::str(it->second.sizes()) +
                                  ", the model's has " + c10::str(c10::IntArrayRef(part.shape)));
    }
    out[name] = it->second.reshape(-1).narrow(0, part.begin, part.end - part.begin).to(part.values.device()).clone();
  }
  return out;
}

std::map<std::string, at::Tensor> wholes_of(const HeldWeights& held, const std::map<std::string, at::Tensor>& parts) {
  dist::NamedParts given;
  for (const auto& [name, part] : held.parts) {
    dist::LocalPart p = part;
    const auto it = parts.find(name);
    if (it == parts.end()) throw std::logic_error("wholes_of: no part of '" + name + "'");
    p.values = it->second.to(part.values.device());
    p.dtype = it->second.scalar_type();
    given.emplace_back(name, std::move(p));
  }
  std::map<std::string, at::Tensor> out = parts;
  for (auto& [name, t] : held.sharded->gather_held_parts(given)) {
    const at::Device device = parts.at(name).device();
    out[name] = t.to(device);
  }
  return out;
}

}  // namespace composer::algorithms::detail
