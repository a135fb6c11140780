// EMA: keeps an exponential moving average of the weights and evaluates (and checkpoints) with it (Composer's EMA).
#pragma once

#include "composer/core/algorithm.h"
#include "composer/core/fields.h"
#include "composer/core/time.h"

#include <torch/arg.h>
#include <torch/nn/module.h>

#include <map>
#include <memory>
#include <optional>
#include <string>

namespace composer {
namespace dist {
class Strategy;
}
namespace algorithms {

/// The averaged copies of a model's trainable parameters and of all its buffers, by their names in the model
/// (Composer's EMAParameters).
struct EMAParameters {
  std::map<std::string, at::Tensor> named_parameters_dict;
  std::map<std::string, at::Tensor> named_buffers_dict;

  /// Clones of `model`'s parameters that require gradients and of every buffer.
  static EMAParameters of(const torch::nn::Module& model);
  /// Exchanges the values of the model's parameters and buffers with these (same names); shapes must agree.
  void swap_params(torch::nn::Module& model);
  /// Copies these values into the model's parameters and buffers of the same names.
  void transfer_ema_params(torch::nn::Module& model) const;
  /// Moves each tensor to the device of the model's tensor of the same name.
  void move_params_to_device(const torch::nn::Module& model);
};

}  // namespace algorithms

namespace functional {

/// Moves `ema_model`'s weights towards `model`'s: for every parameter and buffer of `model` whose name `ema_model`
/// also has, ema = ema * smoothing + weight * (1 - smoothing), in place (Composer's compute_ema; integer buffers such
/// as BatchNorm's num_batches_tracked are averaged and truncated back, as there). `smoothing` in [0, 1].
void compute_ema(const torch::nn::Module& model, torch::nn::Module& ema_model, double smoothing = 0.99);
void compute_ema(const torch::nn::Module& model, algorithms::EMAParameters& ema_model, double smoothing = 0.99);

}  // namespace functional

namespace algorithms {

struct EMAOptions {
  /// Half life of a term in the average, in whole batches or epochs; None when `smoothing` is given.
  TORCH_ARG(std::optional<Time>, half_life) = Time::from_batch(1000);
  /// The weight kept per update, in [0, 1]; only without half_life. Not rescaled by update_interval.
  TORCH_ARG(std::optional<double>, smoothing);
  /// Training done before averaging starts ('dur', 'ba' or 'ep'); the average starts from the weights then.
  TORCH_ARG(Time, ema_start) = Time::from_duration(0.0);
  /// Period of the updates ('ba' or 'ep', whole numbers); None: one unit of half_life ('1ba' with smoothing).
  TORCH_ARG(std::optional<Time>, update_interval);

 public:
  void validate() const;
  /// The update interval in effect.
  Time interval() const;
  /// The smoothing in effect: 2^(-interval / half_life), or `smoothing`.
  double effective_smoothing() const;
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("half_life", self.half_life_, "half life of a term of the average ('ba' or 'ep'); None with smoothing");
    visit("smoothing", self.smoothing_, "weight kept per update, in [0, 1]; only without half_life");
    visit("ema_start", self.ema_start_, "training before averaging starts ('dur', 'ba' or 'ep')");
    visit("update_interval", self.update_interval_, "update period ('ba' or 'ep'); None: 1 unit of half_life");
  }
};

/// Averages the weights after every update_interval batches (BATCH_END) or epochs (EPOCH_END) from ema_start on.
/// Under a strategy that splits the parameters over the ranks (FSDP) each rank averages its part of each (the averaged
/// copy is sharded like the parameters); the checkpoint state holds the whole tensors, gathered while it is saved
/// (state_dict() is then a collective, which every rank's checkpoint code calls), so it loads on any world size.
/// Evaluation runs with the averaged weights (swapped in at EVAL_START, back at EVAL_END); at a *_CHECKPOINT event
/// where a CheckpointSaver will save, the averaged weights are swapped in, so the checkpoint's model holds them and
/// this algorithm's state holds the training weights, and BATCH_START swaps back. The state (both sets, which is
/// active, whether averaging started) is in the checkpoint.
class EMA : public Algorithm {
 public:
  explicit EMA(EMAOptions options = EMAOptions());
  bool match(Event event, const State& state) override;
  std::optional<int> apply(Event event, State& state, Logger& logger) override;
  std::string repr() const override;
  c10::IValue state_dict() const override;
  void load_state_dict(const c10::IValue& state) override;

  const EMAOptions& options() const { return options_; }
  double smoothing() const { return smoothing_; }
  /// Unset before INIT.
  const std::optional<EMAParameters>& ema_model() const { return ema_model_; }
  bool ema_weights_active() const { return ema_weights_active_; }
  bool ema_started() const { return ema_started_; }
  /// Copies the averaged weights into `model` (Composer's get_ema_model); an error while they are active there, and
  /// under a sharded strategy (read them from a checkpoint there).
  torch::nn::Module& get_ema_model(torch::nn::Module& model) const;
  /// Copies the training weights, held here while the averaged ones are active, into `model`.
  torch::nn::Module& get_training_model(torch::nn::Module& model) const;

 private:
  bool should_start(const State& state) const;
  void ensure_training_weights_active(State& state);
  void ensure_ema_weights_active(State& state);
  // Under a sharded strategy: the whole averaged copy (made at INIT, or loaded) cut to this rank's parts, once.
  void hold_as_parts(const State& state);

  EMAOptions options_;
  Time interval_;
  double smoothing_;
  Event update_event_;
  std::optional<EMAParameters> ema_model_;
  bool ema_weights_active_ = false;
  bool ema_started_ = false;
  std::shared_ptr<dist::Strategy> sharded_by_;  // set while ema_model_'s parameters are this rank's parts
};

}  // namespace algorithms
}  // namespace composer
