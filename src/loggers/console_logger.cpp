#include "composer/loggers/console_logger.h"

#include "composer/core/state.h"
#include "composer/dist/env.h"

#include <cstdio>
#include <iomanip>

namespace composer {
namespace {

std::string format_value(double v) {
  char buf[64];
  if (v == static_cast<double>(static_cast<int64_t>(v)) && std::abs(v) < 1e15) {
    std::snprintf(buf, sizeof(buf), "%lld", static_cast<long long>(v));
  } else {
    std::snprintf(buf, sizeof(buf), "%.4f", v);
  }
  return buf;
}

std::string yaml_value(const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

}  // namespace

ConsoleLogger::ConsoleLogger(ConsoleLoggerOptions options) : options_(options), enabled_(dist::get_local_rank() == 0) {
  const TimeUnit u = options_.log_interval().unit();
  if (u != TimeUnit::BATCH && u != TimeUnit::EPOCH) {
    throw std::invalid_argument("ConsoleLogger.log_interval '" + options_.log_interval().to_string() +
                                "' must be in ba or ep");
  }
  if (options_.log_interval().value() <= 0) throw std::invalid_argument("ConsoleLogger.log_interval must be positive");
}

void ConsoleLogger::log_hyperparameters(const nlohmann::json& hparams) {
  if (!enabled_) return;
  std::ostream& os = *options_.stream();
  os << std::string(30, '*') << "\nConfig:\n";
  for (auto it = hparams.begin(); it != hparams.end(); ++it) os << it.key() << ": " << yaml_value(it.value()) << "\n";
  os << std::string(30, '*') << "\n";
  hparams_printed_ = true;
}

void ConsoleLogger::log_metrics(const std::map<std::string, double>& metrics, int64_t) {
  for (const auto& [k, v] : metrics) buffer_[k] = v;
}

void ConsoleLogger::log_traces(const std::map<std::string, double>& traces) {
  if (!options_.log_traces()) return;
  for (const auto& [k, v] : traces) buffer_[k] = v;
}

void ConsoleLogger::flush_train(const State& state) {
  if (!enabled_ || buffer_.empty()) return;
  std::ostream& os = *options_.stream();
  os << "[epoch=" << state.timestamp.epoch + (state.timestamp.batch_in_epoch > 0 ? 1 : 0)
     << "][batch=" << state.timestamp.batch_in_epoch;
  if (state.dataloader_len) os << "/" << *state.dataloader_len;
  os << "]:\n";
  for (const auto& [k, v] : buffer_) os << "\t Train " << k << ": " << format_value(v) << "\n";
  os.flush();
  buffer_.clear();
}

void ConsoleLogger::batch_end(State& state, Logger&) {
  const Time& interval = options_.log_interval();
  if (interval.unit() == TimeUnit::BATCH && state.timestamp.batch % interval.int_value() == 0) flush_train(state);
}

void ConsoleLogger::epoch_end(State& state, Logger&) {
  const Time& interval = options_.log_interval();
  if (interval.unit() == TimeUnit::EPOCH && state.timestamp.epoch % interval.int_value() == 0) flush_train(state);
}

void ConsoleLogger::fit_end(State& state, Logger&) { flush_train(state); }

void ConsoleLogger::eval_batch_end(State& state, Logger&) {
  if (!enabled_ || !state.dataloader_len) return;
  const int64_t n = *state.dataloader_len, i = state.eval_timestamp.batch;
  const int64_t every = std::max<int64_t>(1, n / 10);  // about ten lines per evaluation
  if (i % every == 0 || i == n) {
    *options_.stream() << "[Eval batch=" << i << "/" << n << "] Eval on " << state.dataloader_label << " data\n";
  }
}

void ConsoleLogger::eval_end(State& state, Logger&) {
  if (!enabled_) return;
  std::ostream& os = *options_.stream();
  const std::string prefix = "metrics/" + state.dataloader_label + "/";
  for (auto it = buffer_.begin(); it != buffer_.end();) {
    if (it->first.rfind(prefix, 0) == 0) {
      os << "\t Eval " << it->first << ": " << format_value(it->second) << "\n";
      it = buffer_.erase(it);
    } else {
      ++it;
    }
  }
  os.flush();
}

}  // namespace composer
