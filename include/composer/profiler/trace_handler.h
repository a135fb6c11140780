// TraceHandler: where the profiler's markers go (Composer's TraceHandler); a callback, so it also sees the events.
#pragma once

#include "composer/core/callback.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace composer {

struct Timestamp;
class Profiler;

/// The profiler calls these from the training thread, except process_counter_event, which the system profiler calls
/// from its sampling thread: an implementation must make that one safe to call concurrently with the others.
class TraceHandler : public Callback {
 public:
  /// A duration event's start (is_start) or end, at wall-clock time `wall_clock_time_ns` (ns since the epoch).
  virtual void process_duration_event(const std::string& name, const std::vector<std::string>& categories,
                                      bool is_start, const Timestamp& timestamp, int64_t wall_clock_time_ns) {
    (void)name, (void)categories, (void)is_start, (void)timestamp, (void)wall_clock_time_ns;
  }
  virtual void process_instant_event(const std::string& name, const std::vector<std::string>& categories,
                                     const Timestamp& timestamp, int64_t wall_clock_time_ns) {
    (void)name, (void)categories, (void)timestamp, (void)wall_clock_time_ns;
  }
  virtual void process_counter_event(const std::string& name, const std::vector<std::string>& categories,
                                     int64_t wall_clock_time_ns, const std::map<std::string, double>& values) {
    (void)name, (void)categories, (void)wall_clock_time_ns, (void)values;
  }
  /// A Chrome JSON trace written by another tool (LibTorch's Kineto profiler): its events join this handler's
  /// trace, with `ts_shift_us` added to their timestamps to put them on the wall clock.
  virtual void process_chrome_json_trace_file(const std::string& path, double ts_shift_us) {
    (void)path, (void)ts_shift_us;
  }

  /// Set by Profiler::bind_to_state; the handler reads the schedule's action through it.
  void bind_profiler(const Profiler* profiler) { profiler_ = profiler; }

 protected:
  /// The bound profiler; throws std::logic_error naming the handler when there is none.
  const Profiler& profiler() const;

 private:
  const Profiler* profiler_ = nullptr;
};

}  // namespace composer
