// LoRA (Hu et al. 2021) as PEFT applies it: chosen linear layers get a low-rank update B A, scaled by
// lora_alpha / r (lora_alpha / sqrt(r) with use_rslora), beside their frozen weight; only the adapters train. Applied
// by model surgery (a LoraLinear stands in for each nn::Linear, keeping its parameter names), merged into the weights
// for export, and saved and loaded in PEFT's format (adapter_config.json + adapter_model.safetensors).
#pragma once

#include "composer/nn/layers.h"

#include <torch/arg.h>

#include <memory>
#include <string>
#include <vector>

namespace composer::models {

/// PEFT's LoraConfig: the same names and defaults.
struct LoraOptions {
  TORCH_ARG(int64_t, r) = 8;
  TORCH_ARG(double, lora_alpha) = 8.0;
  TORCH_ARG(double, lora_dropout) = 0.0;
  /// Linear layers whose name is one of these or ends with "." + one of these (PEFT's list matching).
  TORCH_ARG(std::vector<std::string>, target_modules) = std::vector<std::string>{"q_proj", "v_proj"};
  /// Scale by lora_alpha / sqrt(r) instead of lora_alpha / r.
  TORCH_ARG(bool, use_rslora) = false;

 public:
  /// Throws std::invalid_argument naming the field (r < 1, dropout outside [0, 1), no target).
  void validate() const;
  double scaling() const;

 public:
  /// The keys a config sets (repr, hyperparameter logging, read_options).
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("r", self.r_, "LoRA rank (in a model config: 0, no adapters, every parameter trains)");
    visit("lora_alpha", self.lora_alpha_, "scaling numerator (scaling = lora_alpha / r)");
    visit("lora_dropout", self.lora_dropout_, "dropout on the adapters' input");
    visit("target_modules", self.target_modules_, "linear layers that get adapters (names or name suffixes)");
    visit("use_rslora", self.use_rslora_, "scale by lora_alpha / sqrt(r)");
  }
};

/// A linear layer with a LoRA adapter: base(x) + lora_B(lora_A(dropout(x))) * scaling. Holds the base layer's weight
/// and bias under their own names (frozen), and lora_A.weight [r, in] (PEFT's kaiming-uniform init) and lora_B.weight
/// [out, r] (zeros, so the model starts as the base).
class LoraLinear : public nn::Layer {
 public:
  LoraLinear(std::shared_ptr<nn::Linear> base, const LoraOptions& options);
  at::Tensor forward(const at::Tensor& x) override;
  /// The base layer with B A * scaling added to its weight (for export; this layer is left as it was).
  std::shared_ptr<nn::Linear> merged() const;
  const std::shared_ptr<nn::Linear>& base() const { return base_; }
  const std::shared_ptr<nn::Linear>& lora_A() const { return a_; }
  const std::shared_ptr<nn::Linear>& lora_B() const { return b_; }
  double scaling() const { return options_.scaling(); }
  const LoraOptions& options() const { return options_; }

 private:
  std::shared_ptr<nn::Linear> base_, a_, b_;
  LoraOptions options_;
};

/// Replaces every nn::Linear that options.target_modules names (anywhere under `model`, a Composite tree) with a
/// LoraLinear and freezes every other parameter. Returns the dotted names of the adapted layers. Throws
/// std::invalid_argument when nothing matches (listing the model's linear layers) or the model already has LoRA.
std::vector<std::string> apply_lora(nn::Layer& model, const LoraOptions& options);
/// Puts merged linear layers back in place of the LoraLinears (trainable again). Returns how many were merged.
int64_t merge_lora(nn::Layer& model);
/// Whether `model` holds a LoraLinear.
bool has_lora(const nn::Layer& model);

/// Writes `dir`/adapter_config.json (the options apply_lora was given) and `dir`/adapter_model.safetensors as PEFT's
/// save_pretrained does for a causal LM (keys base_model.model.<layer>.lora_A.weight), so that
/// peft.PeftModel.from_pretrained(base, dir) loads them onto the transformers model. Throws std::invalid_argument
/// when `model` has no LoRA layer.
void save_lora_adapters(const nn::Layer& model, const std::string& dir);
/// Reads PEFT adapters from `dir` onto `model` (apply_lora with its adapter_config.json, then the weights). Throws
/// std::runtime_error naming the file and key when a tensor is missing or of another shape, or the config is not LoRA.
LoraOptions load_lora_adapters(nn::Layer& model, const std::string& dir);

}  // namespace composer::models
