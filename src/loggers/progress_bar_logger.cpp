#include "composer/loggers/progress_bar_logger.h"

#include "composer/core/state.h"
#include "composer/dist/env.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>

namespace composer {

ProgressBarLogger::ProgressBarLogger(std::FILE* stream, int force_tty)
    : stream_(stream),
      tty_(force_tty < 0 ? ::isatty(::fileno(stream)) != 0 : force_tty == 1),
      enabled_(dist::get_local_rank() == 0) {}

void ProgressBarLogger::log_metrics(const std::map<std::string, double>& metrics, int64_t) {
  for (const auto& [k, v] : metrics)
    if (k.rfind("loss/", 0) == 0 || k.rfind("metrics/", 0) == 0) latest_[k] = v;
}

void ProgressBarLogger::epoch_start(State&, Logger&) { epoch_start_ = last_draw_ = std::chrono::steady_clock::now(); }

namespace {

std::string bar(int64_t done, int64_t total) {
  constexpr int kWidth = 24;
  const int filled = static_cast<int>(kWidth * std::min<int64_t>(done, total) / total);
  return std::to_string(done) + "/" + std::to_string(total) + " [" + std::string(filled, '=') +
         std::string(kWidth - filled, ' ') + "]";
}

/// Whether a bar is due a redraw (`last` moves on when it is): a TTY redraws at most 10 times a second; a log file
/// gets a line every 10 seconds.
bool redraw_due(std::chrono::steady_clock::time_point& last, bool tty) {
  const auto now = std::chrono::steady_clock::now();
  if (std::chrono::duration<double>(now - last).count() < (tty ? 0.1 : 10.0)) return false;
  last = now;
  return true;
}

}  // namespace

void ProgressBarLogger::draw(const State& state, bool final_line) {
  // At EPOCH_END the timestamp has already moved to the next epoch; the finished one is the previous timestamp.
  const Timestamp& ts = final_line && state.timestamp.batch_in_epoch == 0 && state.previous_timestamp
                            ? *state.previous_timestamp
                            : state.timestamp;
  const int64_t done = ts.batch_in_epoch;
  const int64_t total = state.dataloader_len.value_or(0);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch_start_).count();
  const double rate = secs > 0 ? static_cast<double>(done) / secs : 0.0;
  std::string line = "[epoch " + std::to_string(ts.epoch + 1) + "] ";
  if (total > 0) {
    line += bar(done, total);
  } else {
    line += std::to_string(done) + " batches";
  }
  char extra[64];
  std::snprintf(extra, sizeof(extra), " %.1f ba/s", rate);
  line += extra;
  auto it = latest_.find("loss/train/total");
  if (it != latest_.end()) {
    std::snprintf(extra, sizeof(extra), " loss/train/total=%.4f", it->second);
    line += extra;
  }
  emit(line, final_line);
}

void ProgressBarLogger::emit(const std::string& line, bool final_line) {
  if (tty_) {
    std::fprintf(stream_, "\r%s\033[K%s", line.c_str(), final_line ? "\n" : "");
    open_line_ = !final_line;
  } else {
    std::fprintf(stream_, "%s\n", line.c_str());
  }
  std::fflush(stream_);
}

void ProgressBarLogger::batch_end(State& state, Logger&) {
  if (enabled_ && redraw_due(last_draw_, tty_)) draw(state, false);
}

void ProgressBarLogger::epoch_end(State& state, Logger&) {
  if (enabled_) draw(state, true);
}

void ProgressBarLogger::eval_start(State& state, Logger&) {
  if (!enabled_) return;
  // As Composer labels it: the epoch whose model is evaluated at an epoch boundary, the batch count mid-epoch.
  const bool at_epoch_end = state.timestamp.batch_in_epoch == 0;
  eval_desc_ = "[eval " + state.dataloader_label + " | " +
               (at_epoch_end ? "epoch " + std::to_string(state.timestamp.epoch)
                             : "batch " + std::to_string(state.timestamp.batch)) +
               "]";
  if (open_line_) {  // a training bar is on the line: the evaluation's gets its own
    std::fputc('\n', stream_);
    open_line_ = false;
  }
  eval_start_ = last_draw_ = std::chrono::steady_clock::now();
}

void ProgressBarLogger::draw_eval(const State& state, bool final_line) {
  const int64_t done = state.eval_timestamp.batch;
  const int64_t total = state.dataloader_len.value_or(0);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - eval_start_).count();
  std::string line = eval_desc_ + " " + (total > 0 ? bar(done, total) : std::to_string(done) + " batches");
  char buf[128];
  std::snprintf(buf, sizeof(buf), " %.1f ba/s", secs > 0 ? static_cast<double>(done) / secs : 0.0);
  line += buf;
  if (final_line) {
    const std::string prefix = "metrics/" + state.dataloader_label + "/";
    for (const auto& [k, v] : latest_) {
      if (k.rfind(prefix, 0) != 0) continue;
      std::snprintf(buf, sizeof(buf), " %s=%.4f", k.c_str(), v);
      line += buf;
    }
  }
  emit(line, final_line);
}

void ProgressBarLogger::eval_batch_end(State& state, Logger&) {
  if (enabled_ && redraw_due(last_draw_, tty_)) draw_eval(state, false);
}

void ProgressBarLogger::eval_end(State& state, Logger&) {
  if (enabled_) draw_eval(state, true);
}

void ProgressBarLogger::fit_end(State& state, Logger&) {
  if (enabled_ && state.timestamp.batch_in_epoch > 0) draw(state, true);  // stopped mid-epoch
}

}  // namespace composer
