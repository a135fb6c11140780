#include "algorithms/detail/held_weights.h"

#include "composer/core/state.h"
#include "composer/models/composer_model.h"

#include <torch/nn/module.h>

#include <c10/util/Exception.h>

#include <set>
#include <stdexcept>

namespace composer::algorithms::detail {

HeldWeights weights_of(const torch::nn::Module& model, bool frozen_too) {
  HeldWeights held;
  for (const auto& item : model.named_parameters())
    if (frozen_too || item.value().requires_grad()) held.parameters.emplace_back(item.key(), item.value());
  for (const auto& item : model.named_buffers()) held.buffers.emplace_back(item.key(), item.value());
  return held;
}

HeldWeights held_weights(const State& state, bool frozen_too) {
  if (!state.model) return HeldWeights();
  dist::ShardedState* sharded = state.strategy ? state.strategy->sharded_state() : nullptr;
  if (!sharded) return weights_of(*state.model, frozen_too);
  HeldWeights held;
  held.sharded = sharded;
  // FSDP holds a part of every parameter, frozen ones too: those are left out unless asked for.
  std::set<std::string> frozen;
  if (!frozen_too)
    for (const auto& item : state.model->named_parameters())
      if (!item.value().requires_grad()) frozen.insert(item.key());
  for (auto& [name, part] : sharded->held_parameters()) {
    if (frozen.count(name)) continue;
    held.parameters.emplace_back(name, part.values);
    held.parts.emplace_back(name, std::move(part));
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
    const at::Tensor piece = held.sharded->held_part_of(name, it->second, part);
    if (!piece.defined()) {
      throw std::invalid_argument(what + ": '" + name + "' has shape " + c10::str(it->second.sizes()) +
                                  ", which does not fit the model's parameter");
    }
    out[name] = piece.to(part.values.device()).clone();
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

std::map<std::string, at::Tensor> wholes_of_copies(dist::ShardedState& sharded,
                                                   const std::map<std::string, at::Tensor>& parts) {
  HeldWeights held;
  held.sharded = &sharded;
  for (auto& [name, part] : sharded.held_parameters())
    if (parts.count(name)) held.parts.emplace_back(name, std::move(part));
  return wholes_of(held, parts);
}

}  // namespace composer::algorithms::detail
