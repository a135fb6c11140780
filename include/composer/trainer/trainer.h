// Trainer: assembles State, Engine, loggers and the loop units; fit(), eval() and predict() drive them.
#pragma once

#include "composer/trainer/trainer_options.h"

#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>

namespace composer {

struct State;
class Engine;
class Logger;

namespace detail {
struct TrainerImpl;
}

class Trainer {
 public:
  /// Builds the run: State, loggers and callbacks, Engine, INIT (model surgery), metrics, optimizer,
  /// schedulers, BEFORE_LOAD, AFTER_LOAD, seeding. Throws std::invalid_argument on a bad option.
  explicit Trainer(TrainerOptions options);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  /// Trains until max_duration. Throws if it is unset or already reached, or there is no training data.
  void fit();
  /// Trains `duration` more (max_duration = duration + the current count); reset_time zeroes the Timestamp first.
  void fit(const Time& duration, bool reset_time = false);
  /// Runs every evaluator once (EVAL_STANDALONE_START ... EVAL_STANDALONE_END).
  void eval();
  /// Model outputs for each batch, on the CPU.
  std::vector<at::Tensor> predict(DataLoader& loader, int64_t subset_num_batches = -1);
  /// Closes callbacks and loggers; the trainer cannot run afterwards. Called by the destructor.
  void close();

  State& state();
  Logger& logger();
  Engine& engine();

 private:
  std::unique_ptr<detail::TrainerImpl> impl_;
};

}  // namespace composer
