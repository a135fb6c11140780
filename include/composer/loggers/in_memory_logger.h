// InMemoryLogger: keeps everything logged, for tests and for programs that inspect a run.
#pragma once

#include "composer/core/logger.h"
#include "composer/core/time.h"

#include <utility>
#include <vector>

namespace composer {

class InMemoryLogger : public LoggerDestination {
 public:
  void init(State& state, Logger& logger) override;
  void log_hyperparameters(const nlohmann::json& hparams) override;
  void log_metrics(const std::map<std::string, double>& metrics, int64_t step) override;
  void log_table(const std::vector<std::string>& columns, const std::vector<std::vector<nlohmann::json>>& rows,
                 const std::string& name, int64_t step) override;

  /// key -> (Timestamp when logged, value), in order.
  std::map<std::string, std::vector<std::pair<Timestamp, double>>> data;
  /// key -> the last value.
  std::map<std::string, double> most_recent_values;
  nlohmann::json hyperparameters = nlohmann::json::object();
  /// table name -> {"columns": [...], "data": [[...], ...]} (pandas' orient='split', as Composer keeps it); the
  /// last table logged under a name wins.
  std::map<std::string, nlohmann::json> tables;
  /// Values of one key, in order (empty if never logged).
  std::vector<double> values(const std::string& key) const;

 private:
  const State* state_ = nullptr;
};

}  // namespace composer
