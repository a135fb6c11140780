#include "composer/algorithms/registry.h"

#include "composer/algorithms/algorithms.h"
#include "composer/core/fields.h"
#include "utils/detail/text.h"

#include <algorithm>
#include <sstream>
#include <stdexcept>

namespace composer::algorithms {
namespace {

// One entry per algorithm: names and a summary here; the hyperparameters, their defaults and their parsing come
// from the algorithm's options field list (core/fields.h), so they are written once, beside the class.
template <class A, class Options>
AlgorithmEntry entry(std::string name, std::string class_name, std::string summary) {
  return {std::move(name), std::move(class_name), std::move(summary), describe_fields<Options>(),
          [](Hparams& h) -> std::shared_ptr<Algorithm> { return std::make_shared<A>(read_options<Options>(h)); }};
}

std::vector<AlgorithmEntry> entries() {
  std::vector<AlgorithmEntry> e{
      entry<AugMix, AugMixOptions>("augmix", "AugMix", "mix each image with augmented copies"),
      entry<BlurPool, BlurPoolOptions>("blurpool", "BlurPool", "anti-aliased strided convs and max-pools"),
      entry<ChannelsLast, ChannelsLastOptions>("channels_last", "ChannelsLast",
                                               "NHWC weights and activations (faster convolutions on GPUs)"),
      entry<ColOut, ColOutOptions>("colout", "ColOut", "drop random rows and columns"),
      entry<CutMix, CutMixOptions>("cutmix", "CutMix", "paste boxes between samples, mix labels by area"),
      entry<CutOut, CutOutOptions>("cutout", "CutOut", "zero random squares"),
      entry<Factorize, FactorizeOptions>("factorize", "Factorize", "low-rank convs and linears"),
      entry<GhostBatchNorm, GhostBatchNormOptions>("ghost_batchnorm", "GhostBatchNorm",
                                                   "batch norm over ghost batches"),
      entry<LabelSmoothing, LabelSmoothingOptions>("label_smoothing", "LabelSmoothing", "soft targets"),
      entry<MixUp, MixUpOptions>("mixup", "MixUp", "convex combinations of samples and labels"),
      entry<ProgressiveResizing, ProgressiveResizingOptions>("progressive_resizing", "ProgressiveResizing",
                                                             "small images first"),
      entry<RandAugment, RandAugmentOptions>("randaugment", "RandAugment", "random augmentation chains"),
      entry<SqueezeExcite, SqueezeExciteOptions>("squeeze_excite", "SqueezeExcite",
                                                 "channel attention after wide convs"),
      entry<StochasticDepth, StochasticDepthOptions>("stochastic_depth", "StochasticDepth", "drop residual branches"),
      entry<WeightStandardization, WeightStandardizationOptions>("weight_standardization", "WeightStandardization",
                                                                 "standardized conv weights"),
  };
  std::sort(e.begin(), e.end(), [](const AlgorithmEntry& a, const AlgorithmEntry& b) { return a.name < b.name; });
  return e;
}

}  // namespace

const std::vector<AlgorithmEntry>& algorithm_registry() {
  static const std::vector<AlgorithmEntry> registry = entries();
  return registry;
}

const AlgorithmEntry* find_algorithm(const std::string& name) {
  for (const auto& e : algorithm_registry())
    if (e.name == name || e.class_name == name) return &e;
  return nullptr;
}

std::shared_ptr<Algorithm> make_algorithm(const std::string& name, const std::map<std::string, std::string>& hparams,
                                          const std::string& where) {
  const AlgorithmEntry* e = find_algorithm(name);
  if (!e) {
    std::string names;
    for (const auto& entry : algorithm_registry()) names += (names.empty() ? "" : ", ") + entry.name;
    throw std::invalid_argument("unknown algorithm '" + name + "'; registered: " + names);
  }
  Hparams h(hparams, where.empty() ? e->name : where);
  auto algorithm = e->make(h);
  h.check_all_used();
  return algorithm;
}

std::shared_ptr<Algorithm> make_algorithm_from_repr(const std::string& repr) {
  const auto open = repr.find('(');
  if (open == std::string::npos || open == 0 || repr.back() != ')') {
    throw std::invalid_argument("algorithm repr '" + repr + "' is not of the form Name(key=value, ...)");
  }
  std::map<std::string, std::string> hparams;
  std::stringstream args(repr.substr(open + 1, repr.size() - open - 2));
  for (std::string item; std::getline(args, item, ',');) {
    const auto eq = item.find('=');
    if (eq == std::string::npos) {
      if (item.find_first_not_of(' ') == std::string::npos) continue;
      throw std::invalid_argument("algorithm repr '" + repr + "': argument '" + item + "' has no '='");
    }
    const auto trim = [](std::string v) {
      v.erase(0, v.find_first_not_of(' '));
      v.erase(v.find_last_not_of(' ') + 1);
      if (v.size() >= 2 && (v.front() == '\'' || v.front() == '"') && v.back() == v.front())
        v = v.substr(1, v.size() - 2);
      return v;
    };
    hparams[trim(item.substr(0, eq))] = trim(item.substr(eq + 1));
  }
  try {
    return make_algorithm(repr.substr(0, open), hparams);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument("algorithm repr '" + repr + "': " + e.what());
  }
}

}  // namespace composer::algorithms
