// FileLogger: one JSON object per line (hyperparameters, metrics, traces) in a file per rank.
// Composer's FileLogger writes "[metric][batch=N]: k: v" text; JSON lines are easier to read back, so this
// deliberately differs (see docs/loggers.md).
#pragma once

#include "composer/core/logger.h"

#include <torch/arg.h>

#include <fstream>

namespace composer {

struct FileLoggerOptions {
  /// Path; {run_name} and {rank} are filled in. Parent folders are created.
  TORCH_ARG(std::string, filename) = "{run_name}/logs-rank{rank}.jsonl";
  /// Flush every this many batches (and at EPOCH_END, EVAL_END, FIT_END, close).
  TORCH_ARG(int64_t, flush_interval) = 100;
  TORCH_ARG(bool, log_traces) = true;
  /// Replace an existing file instead of failing.
  TORCH_ARG(bool, overwrite) = false;
  /// The name the file is uploaded under (Logger::upload_file, at every flush) to destinations that upload files,
  /// such as RemoteUploaderDownloader; {run_name} and {rank} are filled in. Empty: the filename.
  TORCH_ARG(std::string, remote_file_name);

 public:
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("filename", self.filename_, "path; {run_name} and {rank} are filled in");
    visit("flush_interval", self.flush_interval_, "flush every this many batches");
    visit("log_traces", self.log_traces_, "also write the algorithms' traces");
    visit("overwrite", self.overwrite_, "replace an existing file instead of failing");
    visit("remote_file_name", self.remote_file_name_, "name the file is uploaded under; empty: the filename");
  }
};

/// Lines: {"type":"hparams","data":{...}}, {"type":"metrics","step":N,"data":{...}}, {"type":"traces","data":{...}},
/// {"type":"table","name":S,"step":N,"columns":[...],"data":[[...],...]}.
class FileLogger : public LoggerDestination {
 public:
  explicit FileLogger(FileLoggerOptions options = FileLoggerOptions());
  void init(State& state, Logger& logger) override;
  void log_hyperparameters(const nlohmann::json& hparams) override;
  void log_metrics(const std::map<std::string, double>& metrics, int64_t step) override;
  void log_traces(const std::map<std::string, double>& traces) override;
  void log_table(const std::vector<std::string>& columns, const std::vector<std::vector<nlohmann::json>>& rows,
                 const std::string& name, int64_t step) override;
  void batch_end(State& state, Logger& logger) override;
  void epoch_end(State& state, Logger& logger) override;
  void eval_end(State& state, Logger& logger) override;
  void fit_end(State& state, Logger& logger) override;
  void close(State& state, Logger& logger) override;
  /// The resolved path (after INIT).
  const std::string& path() const { return path_; }

 private:
  void write(const nlohmann::json& line);
  /// Flushes the file and sends it to the destinations that upload files.
  void flush(Logger& logger);
  FileLoggerOptions options_;
  std::string path_, remote_name_;
  std::ofstream out_;
  std::vector<nlohmann::json> pending_;  // lines logged before INIT opened the file
};

}  // namespace composer
