#include "composer/models/lora.h"

#include "composer/formats/safetensors.h"
#include "composer/nn/deferred_init.h"
#include "models/detail/named_weights.h"
#include "utils/detail/text_file.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>

namespace composer::models {
namespace {

namespace fs = std::filesystem;
constexpr const char* kPeftPrefix = "base_model.model.";  // PeftModelForCausalLM's names of the base model's modules

// PEFT's list matching: the module's dotted name is a target or ends with "." + a target.
bool targeted(const std::string& name, const std::vector<std::string>& targets) {
  for (const auto& t : targets) {
    if (name == t || (name.size() > t.size() && name.compare(name.size() - t.size(), t.size(), t) == 0 &&
                      name[name.size() - t.size() - 1] == '.'))
      return true;
  }
  return false;
}

std::string join(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}

// Every (parent, child name, dotted name) of the Composite tree under `model` whose child passes `pick`.
template <class Pick>
std::vector<std::tuple<nn::Composite*, std::string, std::string>> children_where(nn::Layer& model, Pick pick) {
  std::vector<std::tuple<nn::Composite*, std::string, std::string>> out;
  const auto visit = [&](nn::Layer& layer, const std::string& prefix) {
    auto* parent = dynamic_cast<nn::Composite*>(&layer);
    if (!parent) return;
    for (const auto& name : parent->child_names()) {
      if (pick(parent->child(name), join(prefix, name))) out.emplace_back(parent, name, join(prefix, name));
    }
  };
  visit(model, "");  // the root itself (it may live on the stack: named_modules() would need its shared_ptr)
  for (const auto& item : model.named_modules("", /*include_self=*/false)) {
    if (auto* layer = dynamic_cast<nn::Layer*>(item.value().get())) visit(*layer, item.key());
  }
  return out;
}

}  // namespace

void LoraOptions::validate() const {
  const auto fail = [](const std::string& field, const std::string& got, const std::string& expected) {
    throw std::invalid_argument("lora." + field + " is " + got + ", expected " + expected);
  };
  if (r_ < 1) fail("r", std::to_string(r_), ">= 1");
  if (!(lora_alpha_ > 0)) fail("lora_alpha", std::to_string(lora_alpha_), "> 0");
  if (lora_dropout_ < 0 || lora_dropout_ >= 1) fail("lora_dropout", std::to_string(lora_dropout_), "in [0, 1)");
  if (target_modules_.empty()) fail("target_modules", "empty", "the names of linear layers (q_proj, v_proj, ...)");
}

double LoraOptions::scaling() const {
  return use_rslora_ ? lora_alpha_ / std::sqrt(static_cast<double>(r_)) : lora_alpha_ / static_cast<double>(r_);
}

LoraLinear::LoraLinear(std::shared_ptr<nn::Linear> base, const LoraOptions& options)
    : base_(std::move(base)), options_(options) {
  adopt_members_of(*base_);
  a_ = register_module("lora_A",
                       std::make_shared<nn::Linear>(nn::LinearOptions(base_->in_features, options.r()).bias(false)));
  b_ = register_module("lora_B",
                       std::make_shared<nn::Linear>(nn::LinearOptions(options.r(), base_->out_features).bias(false)));
  // Through nn::initialize, so that a model built under nn::DeferredInit (init_device: meta) records them.
  const double bound = 1.0 / std::sqrt(static_cast<double>(base_->in_features));  // kaiming_uniform_(a=sqrt(5))
  nn::initialize(
      a_->weight, [bound](at::Tensor& w) { w.uniform_(-bound, bound); }, /*random=*/true);
  nn::initialize(
      b_->weight, [](at::Tensor& w) { w.zero_(); }, /*random=*/false);
}

at::Tensor LoraLinear::forward(const at::Tensor& x) {
  const double p = options_.lora_dropout();
  const at::Tensor h = p > 0 ? at::dropout(x, p, is_training()) : x;
  return base_->forward(x) + b_->forward(a_->forward(h)) * options_.scaling();
}

std::shared_ptr<nn::Linear> LoraLinear::merged() const {
  auto out = std::make_shared<nn::Linear>(
      nn::LinearOptions(base_->in_features, base_->out_features).bias(base_->bias.defined()));
  out->to(base_->weight.device(), base_->weight.scalar_type());
  at::NoGradGuard no_grad;
  out->weight.copy_(base_->weight + at::matmul(b_->weight, a_->weight) * options_.scaling());
  if (base_->bias.defined()) out->bias.copy_(base_->bias);
  return out;
}

namespace {

// The adapters on the base weight's device and in its dtype. A deferred base (nn::DeferredInit) keeps its record: the
// adapters are deferred too, in float32 on the CPU like every deferred parameter until the Trainer materializes them.
void adopt_placement(LoraLinear& lora, const at::Tensor& base_weight, const std::string& name) {
  const at::Tensor& a = lora.lora_A()->weight;
  if (a.device() == base_weight.device() && a.scalar_type() == base_weight.scalar_type()) return;
  if (nn::is_deferred(base_weight)) {
    throw std::invalid_argument("apply_lora: '" + name + "' is deferred (nn::DeferredInit) in " +
                                std::string(c10::toString(base_weight.scalar_type())) +
                                "; build a deferred model in float32 and choose the precision in the Trainer");
  }
  lora.to(base_weight.device(), base_weight.scalar_type());
}

}  // namespace

std::vector<std::string> apply_lora(nn::Layer& model, const LoraOptions& options) {
  options.validate();
  if (has_lora(model)) throw std::invalid_argument("apply_lora: the model already has LoRA adapters");
  std::vector<std::string> linear_names;
  const auto picked = children_where(model, [&](nn::Layer& child, const std::string& name) {
    if (!dynamic_cast<nn::Linear*>(&child)) return false;
    linear_names.push_back(name);
    return targeted(name, options.target_modules());
  });
  if (picked.empty()) {
    std::string names;
    for (size_t i = 0; i < linear_names.size() && i < 12; ++i) names += (i ? ", " : "") + linear_names[i];
    throw std::invalid_argument("lora.target_modules matches no linear layer of the model (its linear layers: " +
                                (names.empty() ? std::string("none") : names) +
                                (linear_names.size() > 12 ? ", ..." : "") + ")");
  }
  for (auto& p : model.parameters()) p.requires_grad_(false);
  std::vector<std::string> names;
  for (const auto& [parent, child, name] : picked) {
    auto base = std::dynamic_pointer_cast<nn::Linear>(parent->child_ptr(child));
    auto lora = std::make_shared<LoraLinear>(base, options);
    adopt_placement(*lora, base->weight, name);
    parent->replace(child, lora);
    names.push_back(name);
  }
  return names;
}

bool has_lora(const nn::Layer& model) {
  if (dynamic_cast<const LoraLinear*>(&model)) return true;
  for (const auto& m : model.modules(/*include_self=*/false)) {
    if (dynamic_cast<const LoraLinear*>(m.get())) return true;
  }
  return false;
}

int64_t merge_lora(nn::Layer& model) {
  const auto picked = children_where(
      model, [](nn::Layer& child, const std::string&) { return dynamic_cast<LoraLinear*>(&child) != nullptr; });
  for (const auto& [parent, child, name] : picked) {
    auto merged = dynamic_cast<LoraLinear&>(parent->child(child)).merged();
    parent->replace(child, merged);
  }
  return static_cast<int64_t>(picked.size());
}

void save_lora_adapters(const nn::Layer& model, const std::string& dir) {
  NamedTensors tensors;
  LoraOptions options;
  for (const auto& item : model.named_modules("", /*include_self=*/false)) {
    const auto* lora = dynamic_cast<const LoraLinear*>(item.value().get());
    if (!lora) continue;
    options = lora->options();
    tensors.emplace_back(kPeftPrefix + item.key() + ".lora_A.weight",
                         lora->lora_A()->weight.detach().cpu().contiguous());
    tensors.emplace_back(kPeftPrefix + item.key() + ".lora_B.weight",
                         lora->lora_B()->weight.detach().cpu().contiguous());
  }
  if (tensors.empty()) throw std::invalid_argument("save_lora_adapters: the model has no LoRA layer");
  fs::create_directories(dir);
  write_safetensors((fs::path(dir) / "adapter_model.safetensors").string(), tensors, {{"format", "pt"}});
  const nlohmann::json config = {{"peft_type", "LORA"},
                                 {"task_type", "CAUSAL_LM"},
                                 {"r", options.r()},
                                 {"lora_alpha", options.lora_alpha()},
                                 {"lora_dropout", options.lora_dropout()},
                                 {"target_modules", options.target_modules()},
                                 {"use_rslora", options.use_rslora()},
                                 {"bias", "none"},
                                 {"fan_in_fan_out", false},
                                 {"inference_mode", true},
                                 {"init_lora_weights", true},
                                 {"modules_to_save", nullptr},
                                 {"base_model_name_or_path", nullptr}};
  composer::detail::write_json_atomically((fs::path(dir) / "adapter_config.json").string(), config);
}

LoraOptions load_lora_adapters(nn::Layer& model, const std::string& dir) {
  const std::string config_path = (fs::path(dir) / "adapter_config.json").string();
  std::ifstream in(config_path);
  if (!in) throw std::runtime_error("adapter config '" + config_path + "' cannot be opened (missing?)");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error("adapter config '" + config_path + "' is not valid JSON: " + e.what());
  }
  if (j.value("peft_type", "") != "LORA")
    throw std::runtime_error("adapter config '" + config_path + "': peft_type is not LORA");
  if (!j.contains("target_modules") || !j["target_modules"].is_array())
    throw std::runtime_error("adapter config '" + config_path + "': target_modules must be a list of layer names");
  LoraOptions o;
  o.r(j.value("r", int64_t{8}))
      .lora_alpha(j.value("lora_alpha", 8.0))
      .lora_dropout(j.value("lora_dropout", 0.0))
      .target_modules(j["target_modules"].get<std::vector<std::string>>())
      .use_rslora(j.value("use_rslora", false));
  apply_lora(model, o);
  const std::string file = (fs::path(dir) / "adapter_model.safetensors").string();
  detail::NamedWeights weights(model, "adapters '" + file + "'");
  for (const auto& [key, t] : read_safetensors(file))
    weights.fill(key.rfind(kPeftPrefix, 0) == 0 ? key.substr(std::strlen(kPeftPrefix)) : key, t, key);
  weights.require_all([](const std::string& name) {
    return name.find(".lora_A.") != std::string::npos || name.find(".lora_B.") != std::string::npos;
  });
  return o;
}

}  // namespace composer::models
