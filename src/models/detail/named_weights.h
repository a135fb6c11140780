// NamedWeights: a module's parameters filled from named tensors (a pretrained directory, a GGUF file, LoRA adapters):
// every tensor must name a parameter of the same shape, and every parameter the file must give is given. The one
// place the pretrained loaders check names and shapes, so their errors read alike.
#pragma once

#include "composer/nn/deferred_init.h"

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/ordered_dict.h>

#include <functional>
#include <set>
#include <string>

namespace composer::models::detail {

class NamedWeights {
 public:
  /// `source` names the file or directory in every error.
  NamedWeights(torch::nn::Module& module, std::string source);
  /// Copies `value` into the parameter `name` (no gradient recorded). std::runtime_error "<source>: tensor '<shown>'
  /// ..." when the module has no such parameter or its shape differs; `shown` is the tensor's name in the file (default
  /// `name`).
  void fill(const std::string& name, const at::Tensor& value, const std::string& shown = "");
  /// fill() from a file's tensor of `shape`, read by `read` (nn::initialize_from): now, or, for a model built under
  /// nn::DeferredInit, when it is materialized (by FSDP only the part each rank keeps).
  void fill_from(const std::string& name, at::IntArrayRef shape, nn::PartReader read, const std::string& shown = "");
  /// std::runtime_error "<source> lacks tensor '<name>'" for the first parameter `needed` picks (every one when
  /// unset) that no fill() gave.
  void require_all(const std::function<bool(const std::string&)>& needed = nullptr) const;

 private:
  at::Tensor& checked(const std::string& name, at::IntArrayRef shape, const std::string& shown);
  torch::OrderedDict<std::string, at::Tensor> params_;
  std::string source_;
  std::set<std::string> filled_;
};

/// A loaded model converted to the `dtype` a loader was asked for (`loader` names it in the error): float32 as read,
/// others by Module::to, which a model still deferred (nn::DeferredInit) cannot take (std::invalid_argument).
void convert_loaded(torch::nn::Module& model, at::ScalarType dtype, const std::string& loader);

}  // namespace composer::models::detail
