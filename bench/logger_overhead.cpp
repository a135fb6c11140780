// bench/logger_overhead: the cost of logging a training run's metrics to TensorboardLogger: S steps of K scalar keys
// each (log_metrics, then flushes as the trainer would every flush_interval batches), timed to the closed file.
// bench/logger_overhead.sh runs it interleaved with torch's SummaryWriter doing the same (what Composer's
// TensorboardLogger calls). Prints "RESULT impl=cpp steps=S keys=K us_per_step=X bytes=B".
//   logger_overhead [--steps 20000] [--keys 20] [--dir /tmp/composer_logger_bench]
#include "composer/composer.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>

using namespace composer;

int main(int argc, char** argv) {
  int64_t steps = 20000, keys = 20;
  std::string dir = "/tmp/composer_logger_bench";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--steps"))
      steps = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--keys"))
      keys = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--dir"))
      dir = argv[i + 1];
  }
  std::filesystem::remove_all(dir);
  std::vector<std::string> names;
  for (int64_t k = 0; k < keys; ++k) names.push_back("metrics/train/key_" + std::to_string(k));
  State state;
  state.run_name = "bench";
  auto tb = std::make_shared<TensorboardLogger>(TensorboardLoggerOptions().log_dir(dir).flush_interval(100));
  Logger logger(state, {tb});
  const auto start = std::chrono::steady_clock::now();
  tb->init(state, logger);
  std::map<std::string, double> metrics;
  for (int64_t s = 1; s <= steps; ++s) {
    state.timestamp.batch = s;
    for (int64_t k = 0; k < keys; ++k) metrics[names[k]] = 1.0 / double(s + k);
    logger.log_metrics(metrics, s);
    tb->batch_end(state, logger);
  }
  const std::string file = tb->event_file();
  tb->close(state, logger);
  const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  std::printf("RESULT impl=cpp steps=%lld keys=%lld us_per_step=%.3f bytes=%llu\n", (long long)steps, (long long)keys,
              us / double(steps), (unsigned long long)std::filesystem::file_size(file));
  return 0;
}
