// SystemProfiler: samples the machine's counters on a thread into the profiler's trace (Composer's SystemProfiler).
#pragma once

#include "composer/core/callback.h"

#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <thread>

namespace composer {

class Profiler;

/// Made by Profiler::bind_to_state when a sys_prof_* option is set. From INIT until close, every
/// sys_prof_stats_thread_interval_seconds it records counters (while the schedule is not SKIP), with Composer's names
/// and psutil's formulas (Linux): "cpu" {cpu_percent}; memory/cuda/<allocator statistic> on a GPU, "memory/swap"
/// {used_gb, free_gb}, "memory/virtual" {used_gb, available_gb}; disk/<disk>/<read_count, write_count, read_bytes,
/// write_bytes, read_time, write_time, busy_time> {field_name}; network/<nic>/kb_sent {kb_sent},
/// network/<nic>/kb_recv {kb_recv}.
class SystemProfiler : public Callback {
 public:
  explicit SystemProfiler(Profiler& profiler);
  ~SystemProfiler() override;
  void init(State& state, Logger& logger) override;
  void close(State& state, Logger& logger) override;

  /// One sample, recorded through the profiler's markers.
  void sample();

 private:
  void stop();

  Profiler& profiler_;
  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  double last_cpu_total_ = 0, last_cpu_busy_ = 0;
};

}  // namespace composer
