#include "composer/nn/layer.h"

#include <stdexcept>

namespace composer::nn {

void Layer::adopt_members_of(const Layer& inner) {
  for (const auto& p : inner.named_parameters(/*recurse=*/false))
    register_parameter(p.key(), p.value(), p.value().requires_grad());
  for (const auto& b : inner.named_buffers(/*recurse=*/false)) register_buffer(b.key(), b.value());
  for (const auto& c : inner.named_children()) register_module(c.key(), c.value());
}

std::shared_ptr<Layer> Composite::add(const std::string& name, std::shared_ptr<Layer> layer) {
  if (!layer) throw std::invalid_argument("Composite::add: layer '" + name + "' is null");
  if (layers_.count(name)) throw std::invalid_argument("Composite::add: a child named '" + name + "' already exists");
  register_module(name, layer);
  order_.push_back(name);
  layers_[name] = layer;
  return layer;
}

Layer& Composite::child(const std::string& name) const { return *child_ptr(name); }

std::shared_ptr<Layer> Composite::child_ptr(const std::string& name) const {
  auto it = layers_.find(name);
  if (it == layers_.end()) throw std::out_of_range("Composite has no child '" + name + "'");
  return it->second;
}

bool Composite::replace(const std::string& name, std::shared_ptr<Layer> layer) {
  auto it = layers_.find(name);
  if (it == layers_.end()) return false;
  if (!layer) throw std::invalid_argument("Composite::replace: replacement for '" + name + "' is null");
  replace_module(name, layer);
  it->second = std::move(layer);
  return true;
}

Sequential::Sequential(std::vector<std::shared_ptr<Layer>> layers) {
  for (auto& l : layers) push_back(std::move(l));
}

void Sequential::push_back(std::shared_ptr<Layer> layer) {
  add(std::to_string(child_names().size()), std::move(layer));
}

at::Tensor Sequential::forward(const at::Tensor& x) {
  at::Tensor y = x;
  for (const auto& name : child_names()) y = child(name).forward(y);
  return y;
}

}  // namespace composer::nn
