// SWA: stochastic weight averaging; the model ends with the average of its weights over the end of training
// (Composer's SWA, on torch.optim.swa_utils' AveragedModel and SWALR).
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

namespace torch::optim {
class Optimizer;
}

namespace composer {
namespace dist {
class Strategy;
}
namespace functional {

enum class AnnealStrategy { LINEAR, COS };
std::string field_text(AnnealStrategy value);
/// Reads 'linear' (or 'lin') and 'cos' (or 'cosine'), case-insensitive, as Composer does.
void read_field(Hparams& hparams, const std::string& key, AnnealStrategy& value);

/// The running mean of a model's parameters (torch's AveragedModel with its default average, on the CPU), with the
/// model's buffers as they were at the last update (AveragedModel, use_buffers=False, averages no buffers and keeps
/// them in sync with the model's).
struct AveragedWeights {
  std::map<std::string, at::Tensor> parameters;
  std::map<std::string, at::Tensor> buffers;
  int64_t n_averaged = 0;
  /// Empty averages of `model`'s parameters, and CPU copies of its buffers.
  static AveragedWeights of(const torch::nn::Module& model);
};

/// AveragedModel.update_parameters: the first call copies `model`'s parameters, call n + 1 sets
/// avg = avg + (p - avg) / (n + 1); the buffers become copies of the model's. Throws std::invalid_argument when a
/// parameter is missing or differs in shape.
void update_averaged_weights(AveragedWeights& averaged, const torch::nn::Module& model);
/// Loads the averaged parameters and the kept buffers into `model` (load_state_dict of the averaged module).
void load_averaged_weights(const AveragedWeights& averaged, torch::nn::Module& model);

/// torch.optim.swa_utils.SWALR: anneals each group's learning rate from what it is to swa_lr over anneal_epochs of
/// its steps, linearly or by a half cosine. Constructing it takes step 0 (which changes no rate), as torch's does.
class SWALR {
 public:
  SWALR(torch::optim::Optimizer& optimizer, double swa_lr, int64_t anneal_epochs = 10,
        AnnealStrategy strategy = AnnealStrategy::COS);
  /// One restored from a checkpoint after `step_count` steps (no step taken).
  SWALR(double swa_lr, int64_t anneal_epochs, AnnealStrategy strategy, int64_t step_count);
  /// One step: lr = swa_lr * alpha(t) + prev * (1 - alpha(t)), t = step / anneal_epochs clamped to [0, 1], where
  /// prev is the rate before the last step's annealing, recovered from the group's current rate.
  void step(torch::optim::Optimizer& optimizer);
  double swa_lr() const { return swa_lr_; }
  int64_t step_count() const { return step_count_; }

 private:
  double anneal(double t) const;
  double swa_lr_;
  int64_t anneal_epochs_;
  AnnealStrategy strategy_;
  int64_t step_count_ = 0;
};

}  // namespace functional

namespace algorithms {

struct SWAOptions {
  /// When averaging starts, in 'dur' ([0, 1]) or 'ep'.
  TORCH_ARG(Time, swa_start) = Time::from_duration(0.7);
  /// When the averaged weights replace the model's, in swa_start's unit and after it. The training left after it
  /// updates the BatchNorm statistics for the averaged weights.
  TORCH_ARG(Time, swa_end) = Time::from_duration(0.97);
  /// Period of the averaging, in 'ba' or 'ep'.
  TORCH_ARG(Time, update_interval) = Time::from_epoch(1);
  /// Anneal the learning rate with SWALR from the averaging's start.
  TORCH_ARG(bool, schedule_swa_lr) = false;
  TORCH_ARG(functional::AnnealStrategy, anneal_strategy) = functional::AnnealStrategy::LINEAR;
  /// SWALR steps (averaging updates) of the annealing, > 0.
  TORCH_ARG(int64_t, anneal_steps) = 10;
  /// Accepted as in Composer, which replaces it by the schedule's last rate when schedule_swa_lr is set.
  TORCH_ARG(std::optional<double>, swa_lr);

 public:
  void validate() const;
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("swa_start", self.swa_start_, "start of the averaging ('dur' in [0, 1] or 'ep')");
    visit("swa_end", self.swa_end_, "when the average replaces the weights (swa_start's unit, after it)");
    visit("update_interval", self.update_interval_, "averaging period ('ba' or 'ep')");
    visit("schedule_swa_lr", self.schedule_swa_lr_, "anneal the learning rate with SWALR once averaging starts");
    visit("anneal_strategy", self.anneal_strategy_, "'linear' or 'cos'");
    visit("anneal_steps", self.anneal_steps_, "averaging updates of the annealing, > 0");
    visit("swa_lr", self.swa_lr_, "unused: the schedule's last rate is the SWA rate (as Composer)");
  }
};

/// At BATCH_END (update_interval in 'ba') or EPOCH_END ('ep') from swa_start on: the first time, snapshots the model
/// (functional::AveragedWeights) and with schedule_swa_lr builds a SWALR towards the run's last learning rate (1.0
/// without a scheduler, as Composer); then every update_interval-th time averages the weights and steps the SWALR.
/// At swa_end the averaged weights (and the buffers of the last update) are loaded into the model and SWA stops. The
/// state (average, counters, SWALR) is in the checkpoint. Requires one parameter group and at most one scheduler
/// when schedule_swa_lr is set. Under a strategy that splits the parameters over the ranks (FSDP) each rank averages
/// its part of each sharded parameter (swa_model() then holds parts, flattened); the checkpoint state holds the whole
/// averages, gathered while it is saved (state_dict() is then a collective, which every rank's checkpoint code calls).
class SWA : public Algorithm {
 public:
  explicit SWA(SWAOptions options = SWAOptions());
  bool match(Event event, const State& state) override;
  std::optional<int> apply(Event event, State& state, Logger& logger) override;
  std::string repr() const override;
  c10::IValue state_dict() const override;
  void load_state_dict(const c10::IValue& state) override;
  const SWAOptions& options() const { return options_; }
  const std::optional<functional::AveragedWeights>& swa_model() const { return swa_model_; }
  bool swa_started() const { return swa_started_; }
  bool swa_completed() const { return swa_completed_; }

 private:
  double time_in_start_unit(const State& state) const;
  void start(State& state);
  // Under a sharded strategy: the whole averages (loaded) cut to this rank's parts, once.
  void hold_as_parts(const State& state);

  SWAOptions options_;
  Event update_event_;
  std::optional<functional::AveragedWeights> swa_model_;
  std::optional<functional::SWALR> swa_scheduler_;
  bool swa_started_ = false;
  bool swa_completed_ = false;
  int64_t step_counter_ = 0;
  std::shared_ptr<dist::Strategy> sharded_by_;  // set while swa_model_'s sharded parameters are this rank's parts
};

}  // namespace algorithms
}  // namespace composer
