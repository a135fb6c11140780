// Module surgery (Composer's utils/module_surgery): replace layers of a model by type, keep the optimizer in step.
//
// Contract: replacements happen in composer::nn::Composite parents (the surgery-ready pattern of
// docs/model_surgery.md), so forward() really runs the new layer. A module a policy targets that cannot be replaced
// (its parent is not a Composite, or it is LibTorch's own layer of the same kind, e.g. torch::nn::Conv2dImpl for a
// policy on composer::nn::Conv2d) is an error naming the module path: surgery never silently does nothing.
#pragma once

#include "composer/nn/layer.h"
#include "composer/utils/type_name.h"

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace torch::optim {
class Optimizer;
}

namespace composer {

/// One rule: which modules it targets and how to build a replacement. `replace(module, index)` receives the
/// index-th match of this policy (in depth-first pre-order) and returns the new layer, or nullptr to keep the old.
struct ReplacementPolicy {
  /// Kind name shown in errors and compared with LibTorch's layer names ("Conv2d" also flags torch::nn::Conv2dImpl).
  std::string kind;
  std::function<bool(const torch::nn::Module&)> matches;
  std::function<std::shared_ptr<nn::Layer>(torch::nn::Module& module, int64_t index)> replace;
};

/// A policy for every module of dynamic type `T` (a Layer subclass); the kind is T's class name.
template <class T>
ReplacementPolicy policy_for(std::function<std::shared_ptr<nn::Layer>(T& module, int64_t index)> fn);

/// A replacement made by surgery: where, what was there, what is there now.
struct Replacement {
  std::string path;  // "layer1.0.conv2" (the first slot when a module sits in several)
  std::shared_ptr<torch::nn::Module> old_module;
  std::shared_ptr<nn::Layer> new_module;
};

struct SurgeryOptions {
  /// When set, parameters of replaced modules leave it (with their state) and the new ones join their group.
  torch::optim::Optimizer* optimizer = nullptr;
  /// Also visit the children of new modules (Composer's recurse_on_replacements).
  bool recurse_on_replacements = false;
};

/// Applies `policies` to the descendants of `root` in depth-first pre-order (each module once, however many slots
/// hold it); the first matching policy wins. A new layer goes to the old one's device and dtype and into every
/// slot that held the old one. Returns the replacements in the order made.
std::vector<Replacement> replace_module_classes(torch::nn::Module& root, const std::vector<ReplacementPolicy>& policies,
                                                const SurgeryOptions& options = {});

/// Number of descendants of `root` (not root itself) whose dynamic type is T, each counted once.
template <class T>
int64_t count_module_instances(const torch::nn::Module& root);
int64_t count_module_instances(const torch::nn::Module& root,
                               const std::function<bool(const torch::nn::Module&)>& pred);

/// Removes `old_params` (and their state) from `optimizer` and appends `new_params` to the group that held them.
/// Throws std::invalid_argument when the old parameters span several groups or none is in the optimizer.
void update_params_in_optimizer(const std::vector<at::Tensor>& old_params, const std::vector<at::Tensor>& new_params,
                                torch::optim::Optimizer& optimizer);
/// Removes `params` and their state from every group of `optimizer` (those it does not hold are ignored).
void remove_params_from_optimizer(const std::vector<at::Tensor>& params, torch::optim::Optimizer& optimizer);

// ---- implementation of the templates ----
template <class T>
ReplacementPolicy policy_for(std::function<std::shared_ptr<nn::Layer>(T& module, int64_t index)> fn) {
  ReplacementPolicy p;
  p.kind = class_name(typeid(T));
  p.matches = [](const torch::nn::Module& m) { return dynamic_cast<const T*>(&m) != nullptr; };
  p.replace = [fn = std::move(fn)](torch::nn::Module& m, int64_t i) { return fn(dynamic_cast<T&>(m), i); };
  return p;
}

template <class T>
int64_t count_module_instances(const torch::nn::Module& root) {
  return count_module_instances(root, [](const torch::nn::Module& m) { return dynamic_cast<const T*>(&m) != nullptr; });
}

}  // namespace composer
