// ProgressBarLogger: a live bar per training epoch and per evaluation (as Composer's: one per evaluator run, labelled
// with the evaluator and when it runs), on a TTY; plain periodic lines when the stream is a file or pipe (CI, logs).
#pragma once

#include "composer/core/logger.h"

#include <chrono>
#include <cstdio>

namespace composer {

class ProgressBarLogger : public LoggerDestination {
 public:
  /// `stream` defaults to stderr. `force_tty`: 1 = bar, 0 = plain lines, -1 = detect with isatty().
  explicit ProgressBarLogger(std::FILE* stream = stderr, int force_tty = -1);
  void log_metrics(const std::map<std::string, double>& metrics, int64_t step) override;
  void epoch_start(State& state, Logger& logger) override;
  void batch_end(State& state, Logger& logger) override;
  void epoch_end(State& state, Logger& logger) override;
  void eval_start(State& state, Logger& logger) override;
  void eval_batch_end(State& state, Logger& logger) override;
  void eval_end(State& state, Logger& logger) override;
  void fit_end(State& state, Logger& logger) override;

 private:
  void draw(const State& state, bool final_line);
  void draw_eval(const State& state, bool final_line);
  /// Writes a line: in place on a TTY (a newline when final), else as its own line.
  void emit(const std::string& line, bool final_line);
  std::FILE* stream_;
  bool tty_;
  bool enabled_;
  std::map<std::string, double> latest_;
  std::chrono::steady_clock::time_point epoch_start_, last_draw_, eval_start_;
  std::string eval_desc_;   // "[eval LABEL | epoch E]" or "| batch B]" mid-epoch
  bool open_line_ = false;  // a TTY bar drawn without its newline yet
};

}  // namespace composer
