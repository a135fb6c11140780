#include "composer/loggers/file_logger.h"

#include "composer/core/format_name.h"
#include "composer/core/state.h"

#include <filesystem>
#include <stdexcept>

namespace composer {
FileLogger::FileLogger(FileLoggerOptions options) : options_(std::move(options)) {
  if (options_.filename().empty()) throw std::invalid_argument("FileLogger.filename must not be empty");
  if (options_.flush_interval() <= 0) throw std::invalid_argument("FileLogger.flush_interval must be > 0");
}

void FileLogger::init(State& state, Logger&) {
  path_ = format_name_with_dist(options_.filename(), state.run_name);
  remote_name_ =
      options_.remote_file_name().empty() ? path_ : format_name_with_dist(options_.remote_file_name(), state.run_name);
  const std::filesystem::path p(path_);
  if (std::filesystem::exists(p) && !options_.overwrite()) {
    throw std::invalid_argument("FileLogger: '" + path_ + "' already exists; set overwrite or choose another filename");
  }
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
  out_.open(path_, std::ios::out | std::ios::trunc);
  if (!out_) throw std::runtime_error("FileLogger: cannot open '" + path_ + "' for writing");
  for (const auto& line : pending_) write(line);
  pending_.clear();
}

void FileLogger::write(const nlohmann::json& line) {
  if (!out_.is_open()) {
    pending_.push_back(line);
    return;
  }
  out_ << line.dump() << '\n';
  if (!out_) throw std::runtime_error("FileLogger: write to '" + path_ + "' failed (disk full?)");
}

void FileLogger::log_hyperparameters(const nlohmann::json& hparams) { write({{"type", "hparams"}, {"data", hparams}}); }

void FileLogger::log_metrics(const std::map<std::string, double>& metrics, int64_t step) {
  write({{"type", "metrics"}, {"step", step}, {"data", metrics}});
}

void FileLogger::log_traces(const std::map<std::string, double>& traces) {
  if (options_.log_traces()) write({{"type", "traces"}, {"data", traces}});
}

void FileLogger::log_table(const std::vector<std::string>& columns,
                           const std::vector<std::vector<nlohmann::json>>& rows, const std::string& name,
                           int64_t step) {
  write({{"type", "table"}, {"name", name}, {"step", step}, {"columns", columns}, {"data", rows}});
}

void FileLogger::flush(Logger& logger) {
  if (!out_.is_open()) return;
  out_.flush();
  if (!out_) throw std::runtime_error("FileLogger: write to '" + path_ + "' failed (disk full?)");
  logger.upload_file(remote_name_, path_, true);
}

void FileLogger::batch_end(State& state, Logger& logger) {
  if (state.timestamp.batch % options_.flush_interval() == 0) flush(logger);
}
void FileLogger::epoch_end(State&, Logger& logger) { flush(logger); }
void FileLogger::eval_end(State&, Logger& logger) { flush(logger); }
void FileLogger::fit_end(State&, Logger& logger) { flush(logger); }
void FileLogger::close(State&, Logger& logger) {
  flush(logger);
  if (out_.is_open()) out_.close();
}

}  // namespace composer
