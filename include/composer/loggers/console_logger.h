// ConsoleLogger: prints buffered metrics every log_interval, Composer's format.
#pragma once

#include "composer/core/logger.h"
#include "composer/core/time.h"

#include <torch/arg.h>

#include <iostream>

namespace composer {

/// TORCH_ARG pastes the type textually; a pointer type needs an alias to stay a mutable pointer.
using OStreamPtr = std::ostream*;

struct ConsoleLoggerOptions {
  /// Print at BATCH_END when batch % interval == 0 (ba), or at EPOCH_END (ep).
  TORCH_ARG(Time, log_interval) = Time::from_batch(1);
  /// Where to print (default std::cerr, like Composer's stderr).
  TORCH_ARG(OStreamPtr, stream) = &std::cerr;
  TORCH_ARG(bool, log_traces) = false;

 public:
  /// The field list (core/fields.h); `stream` is not a field.
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("log_interval", self.log_interval_, "print every this many batches ('ba') or epochs ('ep')");
    visit("log_traces", self.log_traces_, "also print the algorithms' traces");
  }
};

/// Train lines: "[epoch=E][batch=b/N]:" then "\t Train <key>: <value>" (floats with 4 decimals).
/// Eval lines: "[Eval batch=i/N] Eval on <label> data" then "\t Eval <key>: <value>". Hyperparameters once as YAML
/// between 30-star lines. Only local rank 0 prints.
class ConsoleLogger : public LoggerDestination {
 public:
  explicit ConsoleLogger(ConsoleLoggerOptions options = ConsoleLoggerOptions());
  void log_hyperparameters(const nlohmann::json& hparams) override;
  void log_metrics(const std::map<std::string, double>& metrics, int64_t step) override;
  void log_traces(const std::map<std::string, double>& traces) override;
  void batch_end(State& state, Logger& logger) override;
  void epoch_end(State& state, Logger& logger) override;
  void fit_end(State& state, Logger& logger) override;
  void eval_batch_end(State& state, Logger& logger) override;
  void eval_end(State& state, Logger& logger) override;

 private:
  void flush_train(const State& state);
  ConsoleLoggerOptions options_;
  bool enabled_;
  bool hparams_printed_ = false;
  std::map<std::string, double> buffer_;
};

}  // namespace composer
