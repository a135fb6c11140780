// The `interval` option of the callbacks that act every N batches or epochs (ActivationMonitor, ImageVisualizer).
#pragma once

#include "composer/core/state.h"
#include "composer/core/time.h"

#include <cstdint>
#include <stdexcept>
#include <string>

namespace composer::callbacks::detail {

/// Throws std::invalid_argument naming `who`.interval unless it is a time in ba or ep of at least 1.
inline void check_interval(const Time& interval, const std::string& who) {
  if (interval.unit() != TimeUnit::BATCH && interval.unit() != TimeUnit::EPOCH)
    throw std::invalid_argument(who + ".interval is " + interval.to_string() + ", expected a time in ba or ep");
  if (interval.value() < 1)
    throw std::invalid_argument(who + ".interval is " + interval.to_string() + ", expected at least 1");
}

/// The timestamp's count in the interval's unit.
inline int64_t interval_count(const State& state, const Time& interval) {
  return state.timestamp.get(interval.unit()).int_value();
}

/// Whether the count is a multiple of the interval not acted on yet (`last`: the count last acted on), as Composer's
/// callbacks keep their last logged time value: once per multiple, however many microbatches a batch has.
inline bool due_once(const State& state, const Time& interval, int64_t last) {
  const int64_t now = interval_count(state, interval);
  return now % interval.int_value() == 0 && now != last;
}

}  // namespace composer::callbacks::detail
