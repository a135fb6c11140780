#include "composer/core/logger.h"

#include "composer/core/format_name.h"
#include "composer/core/state.h"

namespace composer {

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

void Logger::upload_file(const std::string& remote_file_name, const std::string& file_path, bool overwrite) {
  const std::string name = format_name_with_dist(remote_file_name, state_.run_name);
  for (auto& d : destinations_)
    if (d->can_upload_files()) d->upload_file(name, file_path, overwrite);
}

}  // namespace composer
