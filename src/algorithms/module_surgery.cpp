#include "composer/algorithms/module_surgery.h"

#include "composer/optim/optimizer.h"
#include "composer/utils/compat.h"

#include <torch/torch.h>

#include <stdexcept>
#include <unordered_map>

namespace composer {
namespace {

struct Node {
  std::shared_ptr<torch::nn::Module> module;
  std::string path;
  std::vector<std::pair<torch::nn::Module*, std::string>> slots;  // (parent, child name)
};

// Depth-first pre-order over the registry below `root`, one Node per distinct module with all its slots.
void collect(torch::nn::Module& parent, const std::string& prefix, std::vector<Node>& nodes,
             std::unordered_map<const torch::nn::Module*, size_t>& seen) {
  for (const auto& item : parent.named_children()) {
    const std::string path = prefix.empty() ? item.key() : prefix + "." + item.key();
    auto it = seen.find(item.value().get());
    if (it != seen.end()) {
      nodes[it->second].slots.emplace_back(&parent, item.key());
      continue;
    }
    seen[item.value().get()] = nodes.size();
    nodes.push_back({item.value(), path, {{&parent, item.key()}}});
    collect(*item.value(), path, nodes, seen);
  }
}

const ReplacementPolicy* first_match(const std::vector<ReplacementPolicy>& policies, const torch::nn::Module& m) {
  for (const auto& p : policies)
    if (p.matches(m)) return &p;
  return nullptr;
}

// Every targeted module must be replaceable before anything changes, so a refused surgery leaves the model as it was.
void check_replaceable(const std::vector<Node>& nodes, const std::vector<ReplacementPolicy>& policies) {
  for (const auto& node : nodes) {
    const std::string type = class_name_of(*node.module);
    const ReplacementPolicy* policy = first_match(policies, *node.module);
    if (!policy) {
      for (const auto& p : policies) {
        if (p.kind == type) {
          throw std::invalid_argument(
              "module surgery: '" + node.path + "' is LibTorch's " + type +
              " module, which surgery cannot replace; build the model from composer::nn layers inside "
              "composer::nn::Composite parents (docs/model_surgery.md)");
        }
      }
      continue;
    }
    for (const auto& [parent, name] : node.slots) {
      if (!dynamic_cast<nn::Composite*>(parent)) {
        throw std::invalid_argument("module surgery: cannot replace '" + node.path + "' (" + type + "): its parent " +
                                    class_name_of(*parent) +
                                    " is not a composer::nn::Composite, so its forward() would keep calling the old "
                                    "module (docs/model_surgery.md)");
      }
    }
  }
}

// The new layer follows the old one's device and floating-point dtype (Module::to(dtype) would also cast integer
// buffers, so floating tensors are converted one by one).
// A module without tensors (a pooling layer) follows the first tensor of the whole model.
void match_placement(torch::nn::Module& old_module, nn::Layer& layer, const at::Tensor& model_tensor) {
  std::vector<at::Tensor> old_tensors = old_module.parameters();
  for (const auto& b : old_module.buffers()) old_tensors.push_back(b);
  if (old_tensors.empty() && model_tensor.defined()) old_tensors.push_back(model_tensor);
  if (old_tensors.empty()) return;
  const at::Tensor& ref = old_tensors.front();
  layer.to(ref.device());
  torch::NoGradGuard no_grad;
  for (auto& p : layer.parameters())
    if (p.is_floating_point() && p.scalar_type() != ref.scalar_type()) p.set_data(p.to(ref.scalar_type()));
  for (auto& b : layer.buffers())
    if (b.is_floating_point() && b.scalar_type() != ref.scalar_type()) b.set_data(b.to(ref.scalar_type()));
}

}  // namespace

std::vector<Replacement> replace_module_classes(torch::nn::Module& root, const std::vector<ReplacementPolicy>& policies,
                                                const SurgeryOptions& options) {
  std::vector<Node> nodes;
  std::unordered_map<const torch::nn::Module*, size_t> seen;
  collect(root, "", nodes, seen);
  check_replaceable(nodes, policies);
  std::vector<Replacement> done;
  std::unordered_map<const ReplacementPolicy*, int64_t> counters;
  at::Tensor model_tensor;
  for (const auto& p : root.parameters()) {
    if (p.is_floating_point()) {
      model_tensor = p;
      break;
    }
  }
  for (size_t i = 0; i < nodes.size(); ++i) {  // nodes may grow when recursing on replacements
    const Node node = nodes[i];
    const ReplacementPolicy* policy = first_match(policies, *node.module);
    if (!policy) continue;
    std::shared_ptr<nn::Layer> layer = policy->replace(*node.module, counters[policy]++);
    if (!layer) continue;
    match_placement(*node.module, *layer, model_tensor);
    for (const auto& [parent, name] : node.slots) static_cast<nn::Composite*>(parent)->replace(name, layer);
    if (options.optimizer)
      update_params_in_optimizer(node.module->parameters(), layer->parameters(), *options.optimizer);
    done.push_back({node.path, node.module, layer});
    if (options.recurse_on_replacements) {
      std::vector<Node> added;
      collect(*layer, node.path, added, seen);
      check_replaceable(added, policies);
      nodes.insert(nodes.end(), added.begin(), added.end());
    }
  }
  return done;
}

int64_t count_module_instances(const torch::nn::Module& root,
                               const std::function<bool(const torch::nn::Module&)>& pred) {
  std::vector<Node> nodes;
  std::unordered_map<const torch::nn::Module*, size_t> seen;
  collect(const_cast<torch::nn::Module&>(root), "", nodes, seen);
  int64_t n = 0;
  for (const auto& node : nodes) n += pred(*node.module) ? 1 : 0;
  return n;
}

void update_params_in_optimizer(const std::vector<at::Tensor>& old_params, const std::vector<at::Tensor>& new_params,
                                torch::optim::Optimizer& optimizer) {
  auto& groups = optimizer.param_groups();
  if (groups.empty()) throw std::invalid_argument("update_params_in_optimizer: the optimizer has no parameter groups");
  std::optional<size_t> owner;
  for (const auto& p : old_params) {
    for (size_t g = 0; g < groups.size(); ++g) {
      for (const auto& q : groups[g].params()) {
        if (!q.is_same(p)) continue;
        if (owner && *owner != g) {
          throw std::invalid_argument(
              "update_params_in_optimizer: the replaced module's parameters are in parameter "
              "groups " +
              std::to_string(*owner) + " and " + std::to_string(g) +
              "; surgery supports modules whose parameters share one group");
        }
        owner = g;
      }
    }
  }
  if (!owner && !old_params.empty()) {
    throw std::invalid_argument("update_params_in_optimizer: none of the replaced module's " +
                                std::to_string(old_params.size()) + " parameters is in the optimizer");
  }
  remove_params_from_optimizer(old_params, optimizer);
  auto& params = groups[owner.value_or(0)].params();
  params.insert(params.end(), new_params.begin(), new_params.end());
}

void remove_params_from_optimizer(const std::vector<at::Tensor>& params, torch::optim::Optimizer& optimizer) {
  for (auto& group : optimizer.param_groups()) {
    auto& held = group.params();
    held.erase(std::remove_if(held.begin(), held.end(),
                              [&](const at::Tensor& q) {
                                for (const auto& p : params)
                                  if (q.is_same(p)) return true;
                                return false;
                              }),
               held.end());
  }
  for (const auto& p : params) optim::erase_param_state(optimizer, p);
}

}  // namespace composer
