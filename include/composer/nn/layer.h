// Surgery-ready modules. LibTorch's replace_module() only edits the registry: a parent calling a typed field or an
// nn::Sequential keeps running the old child. Here every parent is a Composite that calls its children through
// one name -> Layer table kept in sync with the registry, so replacing a child really changes forward().
//
// Pattern for user models (see docs/model_surgery.md):
//   struct Block : composer::nn::Composite {
//     Block() { add("conv", std::make_shared<nn::Conv2d>(...)); add("act", std::make_shared<nn::ReLU>()); }
//     at::Tensor forward(const at::Tensor& x) override { return child("act").forward(child("conv").forward(x)); }
//   };
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace composer::nn {

/// A module with one tensor in and one tensor out.
class Layer : public torch::nn::Module {
 public:
  virtual at::Tensor forward(const at::Tensor& x) = 0;
  /// The layer this one wraps and forwards to (activation checkpointing's, an FSDP unit's, an observer's), or null: a
  /// parent that asks a child what it is (a tied head asking its embedding) looks through wrappers with it.
  virtual Layer* stands_in_for() const { return nullptr; }

 protected:
  /// For a layer that stands in for `inner` (wraps it and forwards to it): registers inner's own parameters, buffers
  /// and children under their names, so the model's names do not change and a parent that reads a child's weight by
  /// name (a GPT's tied head) still finds it.
  void adopt_members_of(const Layer& inner);
};

/// A Layer whose children are Layers, resolved by name at every forward().
class Composite : public Layer {
 public:
  /// Registers `layer` as child `name` (also in the torch registry: parameters(), to(), named_modules()).
  std::shared_ptr<Layer> add(const std::string& name, std::shared_ptr<Layer> layer);
  bool has(const std::string& name) const { return layers_.count(name) > 0; }
  /// The child called `name`; throws std::out_of_range naming it.
  Layer& child(const std::string& name) const;
  std::shared_ptr<Layer> child_ptr(const std::string& name) const;
  /// Swaps child `name` for `layer` in both the registry and the dispatch table. Returns false if absent.
  bool replace(const std::string& name, std::shared_ptr<Layer> layer);
  /// Child names in insertion order.
  const std::vector<std::string>& child_names() const { return order_; }

 private:
  std::unordered_map<std::string, std::shared_ptr<Layer>> layers_;
  std::vector<std::string> order_;
};

/// Runs its children in insertion order (a surgery-ready nn::Sequential). Children are named "0", "1", ...
class Sequential : public Composite {
 public:
  Sequential() = default;
  explicit Sequential(std::vector<std::shared_ptr<Layer>> layers);
  /// Appends a layer named by its position.
  void push_back(std::shared_ptr<Layer> layer);
  at::Tensor forward(const at::Tensor& x) override;
};

}  // namespace composer::nn
