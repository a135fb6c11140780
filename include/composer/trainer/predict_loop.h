// PredictLoop: the model's outputs over a loader.
#pragma once

#include "composer/trainer/precision_context.h"

#include <ATen/core/Tensor.h>
#include <torch/arg.h>

#include <vector>

namespace composer {

class DataLoader;
class Engine;
class Logger;
struct State;

struct PredictLoopOptions {
  /// Batches to predict; -1 = the whole loader.
  TORCH_ARG(int64_t, subset_num_batches) = -1;

 public:
  /// The keys a config sets (repr, hyperparameter logging, read_options).
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("subset_num_batches", self.subset_num_batches_, "batches to predict; -1: the whole loader");
  }
};

class PredictLoop {
 public:
  PredictLoop(State& state, Engine& engine, Logger& logger);
  /// PREDICT_START, per batch PREDICT_BATCH_START / PREDICT_BEFORE_FORWARD / PREDICT_AFTER_FORWARD /
  /// PREDICT_BATCH_END, PREDICT_END. Returns the outputs on the CPU; the train loader and the model's mode are
  /// restored afterwards.
  std::vector<at::Tensor> run(DataLoader& loader, PredictLoopOptions options = PredictLoopOptions());

 private:
  State& state_;
  Engine& engine_;
  Logger& logger_;
  PrecisionContext precision_;
};

}  // namespace composer
