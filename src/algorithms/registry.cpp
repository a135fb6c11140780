#include "composer/algorithms/registry.h"

#include "composer/algorithms/algorithms.h"
#include "composer/core/fields.h"

#include <stdexcept>

namespace composer::algorithms {
namespace {

template <class A, class Options>
AlgorithmEntry entry(std::string name, std::string class_name, std::string summary) {
  return registry_entry<Algorithm, A, Options>(std::move(name), std::move(class_name), std::move(summary));
}

std::vector<AlgorithmEntry> entries() {
  return {
      entry<Alibi, AlibiOptions>("alibi", "Alibi", "attention biases instead of position embeddings; short sequences"),
      entry<AugMix, AugMixOptions>("augmix", "AugMix", "mix each image with augmented copies"),
      entry<BlurPool, BlurPoolOptions>("blurpool", "BlurPool", "anti-aliased strided convs and max-pools"),
      entry<ChannelsLast, ChannelsLastOptions>("channels_last", "ChannelsLast",
                                               "NHWC weights and activations (faster convolutions on GPUs)"),
      entry<ColOut, ColOutOptions>("colout", "ColOut", "drop random rows and columns"),
      entry<CutMix, CutMixOptions>("cutmix", "CutMix", "paste boxes between samples, mix labels by area"),
      entry<CutOut, CutOutOptions>("cutout", "CutOut", "zero random squares"),
      entry<EMA, EMAOptions>("ema", "EMA", "evaluate with an exponential moving average of the weights"),
      entry<Factorize, FactorizeOptions>("factorize", "Factorize", "low-rank convs and linears"),
      entry<GatedLinearUnits, GatedLinearUnitsOptions>("gated_linear_units", "GatedLinearUnits",
                                                       "gated linear units in the feed-forward blocks"),
      entry<GhostBatchNorm, GhostBatchNormOptions>("ghost_batchnorm", "GhostBatchNorm",
                                                   "batch norm over ghost batches"),
      entry<GradientClipping, GradientClippingOptions>("gradient_clipping", "GradientClipping",
                                                       "clip gradients by norm, value or adaptively"),
      entry<GyroDropout, GyroDropoutOptions>("gyro_dropout", "GyroDropout", "dropout over preselected subnetworks"),
      entry<LabelSmoothing, LabelSmoothingOptions>("label_smoothing", "LabelSmoothing", "soft targets"),
      entry<LayerFreezing, LayerFreezingOptions>("layer_freezing", "LayerFreezing",
                                                 "freeze the earliest layers progressively"),
      entry<LowPrecisionGroupNorm, LowPrecisionGroupNormOptions>("low_precision_groupnorm", "LowPrecisionGroupNorm",
                                                                 "GroupNorm in the autocast dtype"),
      entry<LowPrecisionLayerNorm, LowPrecisionLayerNormOptions>("low_precision_layernorm", "LowPrecisionLayerNorm",
                                                                 "LayerNorm in the autocast dtype"),
      entry<MixUp, MixUpOptions>("mixup", "MixUp", "convex combinations of samples and labels"),
      entry<NoOpModel, NoOpModelOptions>("no_op_model", "NoOpModel",
                                         "a one-parameter stand-in model, to time the Trainer alone"),
      entry<ProgressiveResizing, ProgressiveResizingOptions>("progressive_resizing", "ProgressiveResizing",
                                                             "small images first"),
      entry<RandAugment, RandAugmentOptions>("randaugment", "RandAugment", "random augmentation chains"),
      entry<SAM, SAMOptions>("sam", "SAM", "sharpness-aware minimization: a second pass at perturbed weights"),
      entry<SelectiveBackprop, SelectiveBackpropOptions>("selective_backprop", "SelectiveBackprop",
                                                         "train on the highest-loss samples of each batch"),
      entry<SeqLengthWarmup, SeqLengthWarmupOptions>("seq_length_warmup", "SeqLengthWarmup",
                                                     "short sequences first, lengthened during warmup"),
      entry<SqueezeExcite, SqueezeExciteOptions>("squeeze_excite", "SqueezeExcite",
                                                 "channel attention after wide convs"),
      entry<StochasticDepth, StochasticDepthOptions>("stochastic_depth", "StochasticDepth", "drop residual branches"),
      entry<SWA, SWAOptions>("swa", "SWA", "stochastic weight averaging over the end of training"),
      entry<WeightStandardization, WeightStandardizationOptions>("weight_standardization", "WeightStandardization",
                                                                 "standardized conv weights"),
  };
}

}  // namespace

const AlgorithmRegistry& algorithm_registry() {
  static const AlgorithmRegistry registry("algorithm", entries());
  return registry;
}

const AlgorithmEntry* find_algorithm(const std::string& name) { return algorithm_registry().find(name); }

std::shared_ptr<Algorithm> make_algorithm(const std::string& name, const std::map<std::string, std::string>& hparams,
                                          const std::string& where) {
  return algorithm_registry().make(name, hparams, where);
}

std::shared_ptr<Algorithm> make_algorithm_from_repr(const std::string& repr) {
  return algorithm_registry().make_from_repr(repr);
}

}  // namespace composer::algorithms
