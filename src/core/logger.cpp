#include "composer/core/logger.h"

#include "composer/core/format_name.h"
#include "composer/core/state.h"

#include <cstdio>
#include <stdexcept>

namespace composer {

std::string format_log_data_value(const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::null:
      return "None";
    case nlohmann::json::value_t::string:
      return "\"" + value.get<std::string>() + "\"";
    case nlohmann::json::value_t::boolean:
      return value.get<bool>() ? "True" : "False";
    case nlohmann::json::value_t::number_integer:
      return std::to_string(value.get<int64_t>());
    case nlohmann::json::value_t::number_unsigned:
      return std::to_string(value.get<uint64_t>());
    case nlohmann::json::value_t::number_float: {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.4f", value.get<double>());
      return buf;
    }
    case nlohmann::json::value_t::object: {
      std::string out = "{ ";
      for (const auto& [k, v] : value.items()) out += "\"" + k + "\": " + format_log_data_value(v) + ", ";
      return out + "}";
    }
    case nlohmann::json::value_t::array: {
      std::string out = "[";
      for (size_t i = 0; i < value.size(); ++i) out += (i ? ", " : "") + format_log_data_value(value[i]);
      return out + "]";
    }
    default:
      return value.dump();
  }
}

Logger::Logger(State& state, std::vector<std::shared_ptr<LoggerDestination>> destinations)
    : state_(state), destinations_(std::move(destinations)) {}

void Logger::add_destination(std::shared_ptr<LoggerDestination> destination) {
  destinations_.push_back(std::move(destination));
}

int64_t Logger::default_step() const { return state_.timestamp.batch; }

void Logger::log_hyperparameters(const nlohmann::json& hparams) {
  for (auto& d : destinations_) d->log_hyperparameters(hparams);
}

void Logger::log_metrics(const std::map<std::string, double>& metrics, std::optional<int64_t> step) {
  const int64_t s = step.value_or(default_step());
  for (auto& d : destinations_) d->log_metrics(metrics, s);
}

void Logger::log_traces(const std::map<std::string, double>& traces) {
  for (auto& d : destinations_) d->log_traces(traces);
}

void Logger::log_images(const at::Tensor& images, const std::string& name, std::optional<int64_t> step) {
  const int64_t s = step.value_or(default_step());
  for (auto& d : destinations_) d->log_images(images, name, s);
}

void Logger::log_table(const std::vector<std::string>& columns, const std::vector<std::vector<nlohmann::json>>& rows,
                       const std::string& name, std::optional<int64_t> step) {
  for (size_t i = 0; i < rows.size(); ++i)
    if (rows[i].size() != columns.size())
      throw std::invalid_argument("log_table '" + name + "': row " + std::to_string(i) + " has " +
                                  std::to_string(rows[i].size()) + " values, expected one per column (" +
                                  std::to_string(columns.size()) + ")");
  const int64_t s = step.value_or(default_step());
  for (auto& d : destinations_) d->log_table(columns, rows, name, s);
}

void Logger::upload_file(const std::string& remote_file_name, const std::string& file_path, bool overwrite) {
  const std::string name = format_name_with_dist(remote_file_name, state_.run_name);
  for (auto& d : destinations_)
    if (d->can_upload_files()) d->upload_file(name, file_path, overwrite);
}

}  // namespace composer
