// State: everything a run is made of. Data only: its serialization is the checkpoint module's
// (checkpoint/state_codec.h); behaviour lives in the loop units, the Engine, algorithms and callbacks.
#pragma once

#include "composer/core/evaluator.h"
#include "composer/core/precision.h"
#include "composer/core/time.h"
#include "composer/data/batch.h"
#include "composer/data/data_loader.h"
#include "composer/dist/strategy.h"

#include <c10/core/Device.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace torch::optim {
class Optimizer;
}

namespace composer {

class Algorithm;
class Callback;
class ComposerModel;
class ComposerScheduler;
class GradScaler;
class Metric;

using MetricMap = std::map<std::string, std::shared_ptr<Metric>>;

struct State {
  std::string run_name;
  std::shared_ptr<ComposerModel> model;
  /// Composer keeps a list of one optimizer; so does this.
  std::shared_ptr<torch::optim::Optimizer> optimizer;
  std::vector<std::shared_ptr<ComposerScheduler>> schedulers;
  /// Each parameter group's learning rate when training started: what the schedulers scale (Composer's LambdaLR
  /// base_lrs). Set at the first scheduler step (from the optimizer's initial lrs, or each group's lr for an optimizer
  /// that does not record one, as torch::optim::SGD), and checkpointed, so a resumed run scales the same values.
  std::vector<double> scheduler_base_lrs;
  /// Set for amp_fp16.
  std::shared_ptr<GradScaler> scaler;
  std::vector<std::shared_ptr<Algorithm>> algorithms;
  /// Logger destinations first, then other callbacks.
  std::vector<std::shared_ptr<Callback>> callbacks;

  /// The whole batch from AFTER_DATALOADER to BEFORE_TRAIN_BATCH and at AFTER_TRAIN_BATCH; the microbatch from
  /// BEFORE_FORWARD to AFTER_BACKWARD.
  Batch batch;
  at::Tensor outputs;
  /// The microbatch's loss that backpropagates: the model's "total", or the sum of its named losses' means.
  at::Tensor loss;
  /// The model's named losses for the microbatch (ComposerModel::losses), "total" included when it returned one.
  std::map<std::string, at::Tensor> losses;

  Timestamp timestamp;
  /// Unset before the first batch.
  std::optional<Timestamp> previous_timestamp;
  Timestamp eval_timestamp;
  Timestamp predict_timestamp;
  std::optional<Time> max_duration;
  /// Epochs or tokens per iteration (TrainerOptions.iteration_length); unset: one endless iteration.
  std::optional<Time> iteration_length;

  /// The loader being iterated (train, an evaluator's, or predict) and its label.
  DataLoader* dataloader = nullptr;
  std::string dataloader_label;
  std::optional<int64_t> dataloader_len;
  std::shared_ptr<DataLoader> train_dataloader;
  std::vector<Evaluator> evaluators;

  Precision precision = Precision::FP32;
  c10::Device device = c10::Device(c10::kCPU);
  /// Samples per microbatch; 0 = the whole batch.
  int64_t device_train_microbatch_size = 0;
  /// > 0: a size that is not a whole number of samples (Composer's float device_train_microbatch_size), given to the
  /// train loader's split_batch in place of device_train_microbatch_size.
  double device_train_microbatch_fraction = 0;
  /// Set when device_train_microbatch_size is "auto": TrainStep halves it when memory runs out (trainer/train_step.h).
  bool auto_microbatching = false;

  MetricMap train_metrics;
  /// label -> metrics of that evaluator.
  std::map<std::string, MetricMap> eval_metrics;
  std::map<std::string, double> train_metric_values;
  std::map<std::string, double> eval_metric_values;
  /// How the run spreads over processes; SingleProcess unless the Trainer (or a hand-written loop) sets another.
  std::shared_ptr<dist::Strategy> strategy = std::make_shared<dist::SingleProcess>();
  /// loss/train/<key> of the last batch (averaged over ranks).
  std::map<std::string, double> total_loss_dict;
  /// The batch (1-based, as timestamp.batch after it) whose training loss first was NaN or inf; unset while every
  /// loss was finite. Not checkpointed. The CLI reports it and exits with status 3.
  std::optional<int64_t> nonfinite_loss_batch;

  uint64_t rank_zero_seed = 0;
  uint64_t seed = 0;

  /// timestamp.get(max_duration.unit) / max_duration; unset without a max_duration.
  std::optional<double> get_elapsed_duration() const;
  /// Ends training after the current batch: max_duration becomes the current count (in batches if it was epochs).
  void stop_training();
  /// Points the loops at `loader`; `len` = -1 uses loader->length(), larger values are clamped to it.
  void set_dataloader(DataLoader* loader, const std::string& label, int64_t len = -1);
};

}  // namespace composer
