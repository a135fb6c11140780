// FitLoop: training from FIT_START to FIT_END, epoch after epoch.
#pragma once

#include "composer/checkpoint/resume.h"
#include "composer/core/fields.h"

#include <torch/arg.h>

#include <string>

namespace composer {

class Engine;
class EvalLoop;
class Logger;
class TrainEpochLoop;
struct State;

struct FitLoopOptions {
  /// The label of the training loader while training (state.dataloader_label).
  TORCH_ARG(std::string, train_dataloader_label) = "train";
  /// Batches per training epoch; -1 = the whole loader.
  TORCH_ARG(int64_t, train_subset_num_batches) = -1;

 public:
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("train_dataloader_label", self.train_dataloader_label_, "label of the training data in metric keys");
    visit("train_subset_num_batches", self.train_subset_num_batches_, "batches per training epoch; -1: all");
  }
};

class FitLoop {
 public:
  FitLoop(State& state, Engine& engine, Logger& logger, TrainEpochLoop& epoch, EvalLoop& eval,
          FitLoopOptions options = FitLoopOptions());

  /// A loaded checkpoint's resume point: its generator states are restored at the next run()'s FIT_START.
  void resume_from(ResumePoint point);
  /// Requires state.train_dataloader and state.max_duration (the Trainer checks them). Logs enabled_algorithms/*,
  /// FIT_START, epochs until max_duration, the final time values, FIT_END, evaluators due at FIT_END; gradients are
  /// released at the end.
  void run();

 private:
  State& state_;
  Engine& engine_;
  Logger& logger_;
  TrainEpochLoop& epoch_;
  EvalLoop& eval_;
  FitLoopOptions options_;
  ResumePoint resume_;
};

}  // namespace composer
