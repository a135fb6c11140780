// Logger and LoggerDestination: where metrics, hyperparameters, traces and files go.
#pragma once

#include "composer/core/callback.h"

#include <ATen/core/Tensor.h>
#include <nlohmann/json.hpp>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace composer {

struct State;

/// A destination is a Callback (it sees every event) that also receives what is logged. Every method is a no-op
/// by default.
class LoggerDestination : public Callback {
 public:
  virtual void log_hyperparameters(const nlohmann::json& hparams) { (void)hparams; }
  virtual void log_metrics(const std::map<std::string, double>& metrics, int64_t step) {
    (void)metrics;
    (void)step;
  }
  virtual void log_traces(const std::map<std::string, double>& traces) { (void)traces; }
  /// images: [N, C, H, W] or [C, H, W].
  virtual void log_images(const at::Tensor& images, const std::string& name, int64_t step) {
    (void)images;
    (void)name;
    (void)step;
  }
  /// A table: column names and rows of values (numbers, strings, booleans), as Composer's log_table.
  virtual void log_table(const std::vector<std::string>& columns, const std::vector<std::vector<nlohmann::json>>& rows,
                         const std::string& name, int64_t step) {
    (void)columns;
    (void)rows;
    (void)name;
    (void)step;
  }
  virtual bool can_upload_files() const { return false; }
  virtual void upload_file(const std::string& remote_file_name, const std::string& file_path, bool overwrite) {
    (void)remote_file_name;
    (void)file_path;
    (void)overwrite;
  }
};

/// A logged value as Composer's format_log_data_value writes it: strings quoted, floats with 4 decimals,
/// booleans True/False, objects "{ "k": v, }", arrays "[a, b]", null None.
std::string format_log_data_value(const nlohmann::json& value);

/// Fans what is logged out to every destination. The default step is timestamp.batch.
class Logger {
 public:
  Logger(State& state, std::vector<std::shared_ptr<LoggerDestination>> destinations = {});

  void log_hyperparameters(const nlohmann::json& hparams);
  void log_metrics(const std::map<std::string, double>& metrics, std::optional<int64_t> step = std::nullopt);
  void log_traces(const std::map<std::string, double>& traces);
  void log_images(const at::Tensor& images, const std::string& name = "Images",
                  std::optional<int64_t> step = std::nullopt);
  /// Every row must have one value per column (std::invalid_argument names the table and the row otherwise).
  void log_table(const std::vector<std::string>& columns, const std::vector<std::vector<nlohmann::json>>& rows,
                 const std::string& name = "Table", std::optional<int64_t> step = std::nullopt);
  /// Sends a file to every destination that can upload files; {run_name} and the dist variables are filled in.
  void upload_file(const std::string& remote_file_name, const std::string& file_path, bool overwrite = false);

  const std::vector<std::shared_ptr<LoggerDestination>>& destinations() const { return destinations_; }
  void add_destination(std::shared_ptr<LoggerDestination> destination);

 private:
  int64_t default_step() const;
  State& state_;
  std::vector<std::shared_ptr<LoggerDestination>> destinations_;
};

}  // namespace composer
