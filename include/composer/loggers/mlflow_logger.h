// MLFlowLogger: metrics, parameters, tags and artifacts in an MLflow tracking server (Composer's MLFlowLogger),
// over MLflow's REST API.
#pragma once

#include "composer/core/logger.h"

#include <torch/arg.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace composer {

namespace detail {
class HttpClient;
}

/// name -> value (tags, metric renames).
using StringMap = std::map<std::string, std::string>;

struct MLFlowLoggerOptions {
  /// Experiment; empty: $MLFLOW_EXPERIMENT_NAME, else "my-mlflow-experiment" (Composer's default). Created if missing.
  TORCH_ARG(std::string, experiment_name) = "";
  /// MLflow run name; empty: the trainer's run name (with "-rank<r>" when every rank logs).
  TORCH_ARG(std::string, run_name) = "";
  /// Tags of the run (C++ only); the logger adds run_name (the trainer's, or $RUN_NAME) and run_group.
  TORCH_ARG(StringMap, tags) = {};
  /// The tracking server, http(s)://host:port; empty: $MLFLOW_TRACKING_URI.
  TORCH_ARG(std::string, tracking_uri) = "";
  /// Only rank 0 logs.
  TORCH_ARG(bool, rank_zero_only) = true;
  /// Seconds between sends of the buffered metrics (also sent at EPOCH_END, EVAL_END, FIT_END and close).
  TORCH_ARG(int64_t, flush_interval) = 10;
  /// Metric key -> the key to log it under (C++ only; exact match).
  TORCH_ARG(StringMap, rename_metrics) = {};
  /// Glob patterns (fnmatch) of metric keys not to log.
  TORCH_ARG(std::vector<std::string>, ignore_metrics) = {};
  /// Glob patterns of hyperparameters not to log.
  TORCH_ARG(std::vector<std::string>, ignore_hyperparameters) = {};
  /// Tag run_group, to group runs; empty: none.
  TORCH_ARG(std::string, run_group) = "";
  /// Continue the experiment's run tagged with this run_name (after autoresume) instead of starting a new one.
  TORCH_ARG(bool, resume) = false;
  /// A value equal to the last one logged for its key is sent again only this many steps later.
  TORCH_ARG(int64_t, log_duplicated_metric_every_n_steps) = 100;

 public:
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("experiment_name", self.experiment_name_,
          "experiment; empty: $MLFLOW_EXPERIMENT_NAME or my-mlflow-experiment");
    visit("run_name", self.run_name_, "MLflow run name; empty: the trainer's run name");
    visit("tracking_uri", self.tracking_uri_,
          "http(s)://host:port of the tracking server; empty: $MLFLOW_TRACKING_URI");
    visit("rank_zero_only", self.rank_zero_only_, "only rank 0 logs");
    visit("flush_interval", self.flush_interval_, "seconds between sends of the buffered metrics");
    visit("ignore_metrics", self.ignore_metrics_, "glob patterns of metric keys not to log");
    visit("ignore_hyperparameters", self.ignore_hyperparameters_, "glob patterns of hyperparameters not to log");
    visit("run_group", self.run_group_, "tag run_group; empty: none");
    visit("resume", self.resume_, "continue the run tagged with this run_name instead of starting one");
    visit("log_duplicated_metric_every_n_steps", self.log_duplicated_metric_every_n_steps_,
          "resend an unchanged value only this many steps later");
  }
  void validate() const;
};

/// At INIT: finds or creates the experiment and starts the run (or, with resume, reopens the one tagged run_name),
/// and sets its tags; then logs hyperparameters mlflow_experiment_id and mlflow_run_id at AFTER_LOAD.
/// Hyperparameters become params (strings as they are, numbers as JSON, booleans True/False); metrics are buffered
/// and sent in batches with their step. log_table uploads "<name>.json" ({"columns": [...], "data": [[...]]});
/// log_images uploads each image as MLflow's log_image does ("images/<name>_<i>%step%<step>%timestamp%<ms>%<id>.png");
/// upload_file puts any file (checkpoints: CheckpointSaverOptions::remote_file_name) into the run's artifacts, which
/// needs a server that serves artifacts (mlflow server's default). At close the run ends FINISHED, or FAILED when
/// the fit did not reach FIT_END.
/// Errors: a server that cannot be reached or refuses at INIT is a std::runtime_error naming the URL and the
/// server's message; later a refusal (HTTP 4xx, such as changing a param's value) is an error too, while a server
/// that is briefly unreachable costs a warning and the data stays buffered for the next send.
class MLFlowLogger : public LoggerDestination {
 public:
  explicit MLFlowLogger(MLFlowLoggerOptions options = MLFlowLoggerOptions());
  ~MLFlowLogger() override;

  void init(State& state, Logger& logger) override;
  void after_load(State& state, Logger& logger) override;
  void fit_start(State& state, Logger& logger) override;
  void batch_end(State& state, Logger& logger) override;
  void epoch_end(State& state, Logger& logger) override;
  void eval_end(State& state, Logger& logger) override;
  void fit_end(State& state, Logger& logger) override;
  void post_close() override;

  void log_hyperparameters(const nlohmann::json& hparams) override;
  void log_metrics(const std::map<std::string, double>& metrics, int64_t step) override;
  void log_table(const std::vector<std::string>& columns, const std::vector<std::vector<nlohmann::json>>& rows,
                 const std::string& name, int64_t step) override;
  void log_images(const at::Tensor& images, const std::string& name, int64_t step) override;
  bool can_upload_files() const override { return enabled_; }
  void upload_file(const std::string& remote_file_name, const std::string& file_path, bool overwrite) override;

  /// Sends what is buffered now.
  void flush();
  const std::string& experiment_id() const { return experiment_id_; }
  const std::string& run_id() const { return run_id_; }

 private:
  nlohmann::json call(const std::string& method, const std::string& endpoint, const nlohmann::json& body);
  void start_run();
  void put_artifact(const std::string& path, const std::string& local_file);
  void put_artifact_bytes(const std::string& path, const std::string& bytes);
  MLFlowLoggerOptions options_;
  bool enabled_;
  std::unique_ptr<detail::HttpClient> http_;
  std::string tracking_uri_, experiment_name_, experiment_id_, run_id_, artifact_uri_, run_name_;
  StringMap tags_;
  std::map<std::string, std::pair<double, int64_t>> metrics_cache_;  // key -> (last value sent, its step)
  nlohmann::json pending_metrics_ = nlohmann::json::array();
  nlohmann::json pending_params_ = nlohmann::json::array();
  std::chrono::steady_clock::time_point last_flush_;
  bool fit_started_ = false, fit_ended_ = false;
};

}  // namespace composer
