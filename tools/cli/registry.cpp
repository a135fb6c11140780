#include "cli/registry.h"

#include "cli/config_node.h"
#include "composer/algorithms/registry.h"

#include <map>
#include <stdexcept>

namespace composer::cli {
namespace {

const std::map<std::string, std::vector<RegistryEntry>>& tables() {
  static const std::map<std::string, std::vector<RegistryEntry>> t{
      {"models",
       {{"mlp", "multilayer perceptron: in_features, hidden (list), num_classes"},
        {"mnist_cnn", "2-conv CNN for 28x28 images: in_channels, num_classes, width"},
        {"cifar_resnet", "CIFAR-style ResNet-20/32/44/56/110: depth, num_classes, in_channels"},
        {"resnet", "ImageNet-style ResNet-18/34/50/101/152: depth, num_classes, in_channels"},
        {"gpt", "GPT-2-style causal decoder: vocab_size, max_seq_len, n_layer, n_head, d_model, d_ff, dropout"},
        {"bert", "BERT-style encoder with a masked-LM head: same keys as gpt"}}},
      {"datasets",
       {{"mnist", "MNIST digits from IDX files (tools/fetch_data.sh): path, split, limit, normalize"},
        {"fashion_mnist",
         "Fashion-MNIST from gzip IDX files: path, split, limit, normalize, crop_padding, horizontal_flip"},
        {"synthetic_images", "random images with a learnable labelling: num_samples, channels, size, num_classes"},
        {"mobydick_chars", "Moby Dick, character level: path, seq_len, text_limit, val_fraction"},
        {"gpt2_tokens", "a text file in GPT-2 BPE tokens: path, vocab_dir, seq_len, text_limit, val_fraction"},
        {"synthetic_tokens", "random token sequences: num_samples, seq_len, vocab_size"}}},
      {"optimizers",
       {{"decoupled_sgdw", "Composer's SGD with schedule-following weight decay (default, lr 0.1)"},
        {"decoupled_adamw", "Composer's AdamW with schedule-following weight decay"},
        {"sgd", "torch::optim::SGD"},
        {"adam", "torch::optim::Adam"},
        {"adamw", "torch::optim::AdamW"}}},
      {"schedulers",
       {{"constant", "alpha before t_max, then 1"},
        {"constant_with_warmup", "linear warmup over t_warmup, then alpha"},
        {"linear", "alpha_i -> alpha_f linearly over t_max"},
        {"linear_with_warmup", "warmup, then alpha_i -> alpha_f linearly"},
        {"step", "gamma ^ floor(t / step_size)"},
        {"multistep", "gamma ^ (milestones passed)"},
        {"multistep_with_warmup", "warmup, then multistep on absolute milestones"},
        {"exponential", "gamma ^ (t / decay_period)"},
        {"cosine_annealing", "cosine from 1 to alpha_f over t_max"},
        {"cosine_annealing_with_warmup", "warmup, then cosine to alpha_f"},
        {"cosine_annealing_warm_restarts", "cosine restarting every t_0 (times t_mult)"},
        {"polynomial", "alpha_f + (1 - t/t_max)^power (1 - alpha_f)"},
        {"polynomial_with_warmup", "warmup, then polynomial decay"}}},
      {"callbacks",
       {{"speed_monitor", "throughput/* and time/* over a window of batches: window_size, time_unit"},
        {"lr_monitor", "lr-<Optimizer>/group<i> every batch"},
        {"threshold_stopper",
         "stop once a metric crosses a threshold: monitor, dataloader_label, threshold, stop_on_batch"}}},
      {"loggers",
       {{"file", "JSON lines per rank: filename, flush_interval, overwrite"},
        {"console", "Composer's console lines: log_interval"}}},
  };
  static const std::map<std::string, std::vector<RegistryEntry>> all = [] {
    auto tables = t;
    auto& algos = tables["algorithms"];
    for (const auto& a : algorithms::algorithm_registry()) {
      std::string fields;
      for (const auto& f : a.fields) fields += (fields.empty() ? "" : ", ") + f.name + "=" + f.value;
      algos.push_back({a.name, a.class_name + ": " + a.summary + (fields.empty() ? "" : " (" + fields + ")")});
    }
    return tables;
  }();
  return all;
}

std::string names(const std::vector<RegistryEntry>& entries) {
  if (entries.empty()) return "(none yet)";
  std::string out;
  for (const auto& e : entries) out += (out.empty() ? "" : ", ") + e.name;
  return out;
}

}  // namespace

std::vector<std::string> registry_kinds() {
  std::vector<std::string> k;
  for (const auto& [kind, entries] : tables()) k.push_back(kind);
  return k;
}

const std::vector<RegistryEntry>& registry(const std::string& kind) {
  auto it = tables().find(kind);
  if (it == tables().end()) {
    std::string kinds;
    for (const auto& k : registry_kinds()) kinds += (kinds.empty() ? "" : ", ") + k;
    throw std::invalid_argument("unknown kind '" + kind + "'; expected one of " + kinds);
  }
  return it->second;
}

void require_registered(const std::string& kind, const std::string& name, const std::string& path) {
  const auto& entries = registry(kind);
  for (const auto& e : entries)
    if (e.name == name) return;
  std::string singular = kind.substr(0, kind.size() - 1);
  throw ConfigError(path + ": unknown " + singular + " '" + name + "'; registered: " + names(entries));
}

}  // namespace composer::cli
