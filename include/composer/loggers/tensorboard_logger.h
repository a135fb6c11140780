// TensorboardLogger: scalars, hyperparameters, images and tables in TensorBoard event files, as Composer's.
#pragma once

#include "composer/core/logger.h"

#include <torch/arg.h>

#include <memory>

namespace composer {

namespace detail {
class EventFileWriter;
}
namespace tensorboard {
class Event;
}

struct TensorboardLoggerOptions {
  /// The folder TensorBoard is pointed at (tensorboard --logdir=...); events go to <log_dir>/<run_name>/.
  TORCH_ARG(std::string, log_dir) = "tensorboard_logs";
  /// Flush every this many batches (and at EPOCH_END, EVAL_END, FIT_END and close).
  TORCH_ARG(int64_t, flush_interval) = 100;
  /// Only rank 0 writes (the other ranks' metrics are already reduced into it).
  TORCH_ARG(bool, rank_zero_only) = true;

 public:
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("log_dir", self.log_dir_, "folder for tensorboard --logdir; events go to <log_dir>/<run_name>/");
    visit("flush_interval", self.flush_interval_, "flush every this many batches");
    visit("rank_zero_only", self.rank_zero_only_, "only rank 0 writes");
  }
  void validate() const;
};

/// What goes where, as in Composer (torch's SummaryWriter under its TensorboardLogger):
/// - log_metrics: one scalar per key at the step (the batch by default);
/// - log_hyperparameters: collected (formatted as Composer's format_log_data_value) and, at every EVAL_END,
///   written with the metrics whose key holds "metric" or "loss" (as "hparams/<key>") to the hparams plugin in
///   <log_dir>/<run_name>/<run_name>/;
/// - log_images: [H, W], [C, H, W] or [N, C, H, W] (C 1, 3 or 4; N images tiled 8 to a row), floats in [0, 1] or
///   uint8, as PNG;
/// - log_table: a Markdown table in the text plugin, under "<name>/text_summary".
/// Each flush also sends the event file to the destinations that upload files, as
/// "tensorboard_logs/{run_name}/<event file>-<rank>".
class TensorboardLogger : public LoggerDestination {
 public:
  explicit TensorboardLogger(TensorboardLoggerOptions options = TensorboardLoggerOptions());
  ~TensorboardLogger() override;

  void init(State& state, Logger& logger) override;
  void log_hyperparameters(const nlohmann::json& hparams) override;
  void log_metrics(const std::map<std::string, double>& metrics, int64_t step) override;
  void log_images(const at::Tensor& images, const std::string& name, int64_t step) override;
  void log_table(const std::vector<std::string>& columns, const std::vector<std::vector<nlohmann::json>>& rows,
                 const std::string& name, int64_t step) override;
  void batch_end(State& state, Logger& logger) override;
  void epoch_end(State& state, Logger& logger) override;
  void eval_end(State& state, Logger& logger) override;
  void fit_end(State& state, Logger& logger) override;
  void close(State& state, Logger& logger) override;

  /// The event file's path (empty before INIT, and on ranks that do not write).
  std::string event_file() const;
  /// The folder of this run's events, <log_dir>/<run_name> (after INIT).
  const std::string& run_dir() const { return run_dir_; }

 private:
  bool writes() const;
  void flush(Logger& logger);
  TensorboardLoggerOptions options_;
  std::string run_name_;
  std::string run_dir_;
  bool initialized_ = false;
  std::unique_ptr<detail::EventFileWriter> writer_;
  std::unique_ptr<detail::EventFileWriter> hparams_writer_;
  std::map<std::string, std::string> hyperparameters_;
  std::map<std::string, double> current_metrics_;
  void write(std::unique_ptr<tensorboard::Event> event);
  std::vector<std::unique_ptr<tensorboard::Event>> pending_;  // what was logged before INIT opened the file
};

}  // namespace composer
