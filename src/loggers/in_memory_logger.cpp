#include "composer/loggers/in_memory_logger.h"

#include "composer/core/state.h"

namespace composer {

void InMemoryLogger::init(State& state, Logger&) { state_ = &state; }

void InMemoryLogger::log_hyperparameters(const nlohmann::json& hparams) { hyperparameters.update(hparams); }

void InMemoryLogger::log_metrics(const std::map<std::string, double>& metrics, int64_t) {
  const Timestamp ts = state_ ? state_->timestamp : Timestamp();
  for (const auto& [k, v] : metrics) {
    data[k].emplace_back(ts, v);
    most_recent_values[k] = v;
  }
}

void InMemoryLogger::log_table(const std::vector<std::string>& columns,
                               const std::vector<std::vector<nlohmann::json>>& rows, const std::string& name, int64_t) {
  tables[name] = {{"columns", columns}, {"data", rows}};
}

std::vector<double> InMemoryLogger::values(const std::string& key) const {
  std::vector<double> out;
  auto it = data.find(key);
  if (it != data.end())
    for (const auto& e : it->second) out.push_back(e.second);
  return out;
}

}  // namespace composer
