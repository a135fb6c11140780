#include "composer/algorithms/registry.h"

#include "composer/algorithms/algorithms.h"
#include "utils/detail/text.h"

#include <algorithm>
#include <sstream>
#include <stdexcept>

namespace composer::algorithms {
namespace {

BatchKey get_key(Hparams& h, const std::string& key, int64_t fallback) {
  const std::string v = h.get_string(key, std::to_string(fallback));
  const bool numeric = !v.empty() && std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; });
  return numeric ? BatchKey{static_cast<int64_t>(std::stoll(v))} : BatchKey{v};
}

std::vector<AlgorithmEntry> entries() {
  std::vector<AlgorithmEntry> e{
      {"augmix", "AugMix", "mix each image with augmented copies: severity, depth, width, alpha, augmentation_set", [](Hparams& h) {
         return std::make_shared<AugMix>(AugMixOptions()
                                             .severity(h.get_double("severity", 3))
                                             .depth(h.get_int("depth", -1))
                                             .width(h.get_int("width", 3))
                                             .alpha(h.get_double("alpha", 1.0))
                                             .augmentation_set(h.get_choice("augmentation_set", "all", {"all", "safe"})));
       }},
      {"blurpool", "BlurPool", "anti-aliased strided convs and max-pools: replace_convs, replace_maxpools, blur_first, min_channels",
       [](Hparams& h) {
         return std::make_shared<BlurPool>(BlurPoolOptions()
                                               .replace_convs(h.get_bool("replace_convs", true))
                                               .replace_maxpools(h.get_bool("replace_maxpools", true))
                                               .blur_first(h.get_bool("blur_first", true))
                                               .min_channels(h.get_int("min_channels", 16)));
       }},
      {"channels_last", "ChannelsLast", "NHWC weights and activations (faster convolutions on GPUs)",
       [](Hparams&) { return std::make_shared<ChannelsLast>(); }},
      {"colout", "ColOut", "drop random rows and columns: p_row, p_col, batch, resize_target, input_key, target_key",
       [](Hparams& h) {
         const std::string rt = h.get_choice("resize_target", "auto", {"auto", "true", "false"});
         return std::make_shared<ColOut>(ColOutOptions()
                                             .p_row(h.get_double("p_row", 0.15))
                                             .p_col(h.get_double("p_col", 0.15))
                                             .batch(h.get_bool("batch", true))
                                             .resize_target(rt == "auto" ? functional::ResizeTarget::Auto
                                                            : rt == "true" ? functional::ResizeTarget::Yes
                                                                           : functional::ResizeTarget::No)
                                             .input_key(get_key(h, "input_key", 0))
                                             .target_key(get_key(h, "target_key", 1)));
       }},
      {"cutmix", "CutMix", "paste boxes between samples, mix labels by area: alpha, interpolate_loss, uniform_sampling",
       [](Hparams& h) {
         return std::make_shared<CutMix>(CutMixOptions()
                                             .alpha(h.get_double("alpha", 1.0))
                                             .interpolate_loss(h.get_bool("interpolate_loss", false))
                                             .uniform_sampling(h.get_bool("uniform_sampling", false))
                                             .input_key(get_key(h, "input_key", 0))
                                             .target_key(get_key(h, "target_key", 1)));
       }},
      {"cutout", "CutOut", "zero random squares: num_holes, length, uniform_sampling, input_key", [](Hparams& h) {
         return std::make_shared<CutOut>(CutOutOptions()
                                             .num_holes(h.get_int("num_holes", 1))
                                             .length(h.get_double("length", 0.5))
                                             .uniform_sampling(h.get_bool("uniform_sampling", false))
                                             .input_key(get_key(h, "input_key", 0)));
       }},
      {"factorize", "Factorize",
       "low-rank convs and linears: factorize_convs, factorize_linears, min_channels, latent_channels, min_features, latent_features",
       [](Hparams& h) {
         return std::make_shared<Factorize>(FactorizeOptions()
                                                .factorize_convs(h.get_bool("factorize_convs", true))
                                                .factorize_linears(h.get_bool("factorize_linears", true))
                                                .min_channels(h.get_int("min_channels", 256))
                                                .latent_channels(h.get_double("latent_channels", 0.25))
                                                .min_features(h.get_int("min_features", 256))
                                                .latent_features(h.get_double("latent_features", 128)));
       }},
      {"ghost_batchnorm", "GhostBatchNorm", "batch norm over ghost batches: ghost_batch_size",
       [](Hparams& h) { return std::make_shared<GhostBatchNorm>(h.get_int("ghost_batch_size", 32)); }},
      {"label_smoothing", "LabelSmoothing", "soft targets: smoothing, target_key", [](Hparams& h) {
         return std::make_shared<LabelSmoothing>(
             LabelSmoothingOptions().smoothing(h.get_double("smoothing", 0.1)).target_key(get_key(h, "target_key", 1)));
       }},
      {"mixup", "MixUp", "convex combinations of samples and labels: alpha, interpolate_loss", [](Hparams& h) {
         return std::make_shared<MixUp>(MixUpOptions()
                                            .alpha(h.get_double("alpha", 0.2))
                                            .interpolate_loss(h.get_bool("interpolate_loss", false))
                                            .input_key(get_key(h, "input_key", 0))
                                            .target_key(get_key(h, "target_key", 1)));
       }},
      {"progressive_resizing", "ProgressiveResizing",
       "small images first: mode, initial_scale, finetune_fraction, delay_fraction, size_increment, resize_targets",
       [](Hparams& h) {
         const std::string mode = h.get_choice("mode", "resize", {"resize", "crop"});
         return std::make_shared<ProgressiveResizing>(
             ProgressiveResizingOptions()
                 .mode(mode == "resize" ? functional::ResizeMode::Resize : functional::ResizeMode::Crop)
                 .initial_scale(h.get_double("initial_scale", 0.5))
                 .finetune_fraction(h.get_double("finetune_fraction", 0.2))
                 .delay_fraction(h.get_double("delay_fraction", 0.5))
                 .size_increment(h.get_int("size_increment", 4))
                 .resize_targets(h.get_bool("resize_targets", false))
                 .input_key(get_key(h, "input_key", 0))
                 .target_key(get_key(h, "target_key", 1)));
       }},
      {"randaugment", "RandAugment", "random augmentation chains: severity, depth, augmentation_set", [](Hparams& h) {
         return std::make_shared<RandAugment>(RandAugmentOptions()
                                                  .severity(h.get_double("severity", 9))
                                                  .depth(h.get_int("depth", 2))
                                                  .augmentation_set(h.get_choice("augmentation_set", "all", {"all", "safe"})));
       }},
      {"squeeze_excite", "SqueezeExcite", "channel attention after wide convs: latent_channels, min_channels", [](Hparams& h) {
         return std::make_shared<SqueezeExcite>(SqueezeExciteOptions()
                                                    .latent_channels(h.get_double("latent_channels", 64))
                                                    .min_channels(h.get_int("min_channels", 128)));
       }},
      {"stochastic_depth", "StochasticDepth",
       "drop residual branches: target_layer_name, stochastic_method, drop_rate, drop_distribution, drop_warmup",
       [](Hparams& h) {
         const std::string method = h.get_choice("stochastic_method", "block", {"block", "sample"});
         const std::string dist = h.get_choice("drop_distribution", "linear", {"linear", "uniform"});
         return std::make_shared<StochasticDepth>(
             StochasticDepthOptions()
                 .target_layer_name(h.get_choice("target_layer_name", "ResNetBottleneck", {"ResNetBottleneck", "BasicBlock"}))
                 .stochastic_method(method == "block" ? functional::StochasticMethod::Block : functional::StochasticMethod::Sample)
                 .drop_rate(h.get_double("drop_rate", 0.2))
                 .drop_distribution(dist == "linear" ? functional::DropDistribution::Linear : functional::DropDistribution::Uniform)
                 .drop_warmup(h.get_double("drop_warmup", 0.0)));
       }},
      {"weight_standardization", "WeightStandardization", "standardized conv weights: n_last_layers_ignore",
       [](Hparams& h) { return std::make_shared<WeightStandardization>(h.get_int("n_last_layers_ignore", 0)); }},
  };
  std::sort(e.begin(), e.end(), [](const AlgorithmEntry& a, const AlgorithmEntry& b) { return a.name < b.name; });
  return e;
}

}  // namespace

Hparams::Hparams(std::map<std::string, std::string> values, std::string where) : values_(std::move(values)), where_(std::move(where)) {}

const std::string* Hparams::find(const std::string& key) {
  asked_.insert(key);
  auto it = values_.find(key);
  return it == values_.end() ? nullptr : &it->second;
}

void Hparams::fail(const std::string& key, const std::string& expected) const {
  throw std::invalid_argument(where_ + (where_.empty() ? "" : ".") + key + ": expected " + expected + ", got '" +
                              values_.at(key) + "'");
}

double Hparams::get_double(const std::string& key, double fallback) {
  const std::string* v = find(key);
  if (!v) return fallback;
  try {
    size_t used = 0;
    const double d = std::stod(*v, &used);
    if (used == v->size()) return d;
  } catch (const std::exception&) {
  }
  fail(key, "a number");
}

int64_t Hparams::get_int(const std::string& key, int64_t fallback) {
  const std::string* v = find(key);
  if (!v) return fallback;
  try {
    size_t used = 0;
    const long long i = std::stoll(*v, &used);
    if (used == v->size()) return i;
  } catch (const std::exception&) {
  }
  fail(key, "an integer");
}

bool Hparams::get_bool(const std::string& key, bool fallback) {
  const std::string* v = find(key);
  if (!v) return fallback;
  const std::string l = composer::detail::to_lower(*v);
  if (l == "true" || l == "yes" || l == "on" || l == "1") return true;
  if (l == "false" || l == "no" || l == "off" || l == "0") return false;
  fail(key, "true or false");
}

std::string Hparams::get_string(const std::string& key, const std::string& fallback) {
  const std::string* v = find(key);
  return v ? *v : fallback;
}

std::string Hparams::get_choice(const std::string& key, const std::string& fallback, const std::vector<std::string>& allowed) {
  const std::string* v = find(key);
  const std::string value = v ? (std::find(allowed.begin(), allowed.end(), *v) != allowed.end() ? *v : composer::detail::to_lower(*v)) : fallback;
  if (std::find(allowed.begin(), allowed.end(), value) != allowed.end()) return value;
  std::string list;
  for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
  fail(key, "one of " + list);
}

void Hparams::check_all_used() const {
  for (const auto& [key, value] : values_) {
    if (asked_.count(key)) continue;
    std::string known;
    for (const auto& k : asked_) known += (known.empty() ? "" : ", ") + k;
    throw std::invalid_argument(where_ + (where_.empty() ? "" : ".") + key + ": unknown hyperparameter; known: " +
                                (known.empty() ? "(none)" : known));
  }
}

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
      if (v.size() >= 2 && (v.front() == '\'' || v.front() == '"') && v.back() == v.front()) v = v.substr(1, v.size() - 2);
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
