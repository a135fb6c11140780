#include "composer/core/interval.h"

#include "composer/core/state.h"

#include <cmath>
#include <memory>
#include <stdexcept>

namespace composer {

IntervalScheduler create_interval_scheduler(const Time& interval, const IntervalSchedulerOptions& options) {
  const std::set<Event> finals = options.final_events();
  const bool include_end_of_training = options.include_end_of_training();
  const bool checkpoint_events = options.checkpoint_events();
  Event trigger;
  switch (interval.unit()) {
    case TimeUnit::EPOCH:
      trigger = checkpoint_events ? Event::EPOCH_CHECKPOINT : Event::EPOCH_END;
      break;
    case TimeUnit::ITERATION:
      trigger = checkpoint_events ? Event::ITERATION_CHECKPOINT : Event::ITERATION_END;
      break;
    default:
      trigger = checkpoint_events ? Event::BATCH_CHECKPOINT : Event::BATCH_END;
      break;
  }
  auto last_batch_seen = std::make_shared<int64_t>(-1);
  return [=](const State& state, Event event) -> bool {
    if (interval.unit() != TimeUnit::DURATION && interval.value() <= 0) return false;
    if (!state.previous_timestamp || !state.max_duration) return false;
    const double elapsed = state.get_elapsed_duration().value_or(0.0);
    if (include_end_of_training && finals.count(event) && elapsed >= 1.0 && state.timestamp.batch != *last_batch_seen) {
      *last_batch_seen = state.timestamp.batch;
      return true;
    }
    if (event != trigger) return false;
    const Timestamp& prev = *state.previous_timestamp;
    bool due = false;
    if (interval.unit() == TimeUnit::DURATION) {
      const Time& max = *state.max_duration;
      if (max.unit() == TimeUnit::EPOCH || max.unit() == TimeUnit::BATCH) {
        double period = interval.value() * max.value();
        if (max.unit() == TimeUnit::EPOCH) {
          if (!state.dataloader_len)
            throw std::invalid_argument("a 'dur' interval with max_duration in epochs needs a sized dataloader");
          period *= static_cast<double>(*state.dataloader_len);
        }
        const auto p = static_cast<int64_t>(std::ceil(period));
        due = p > 0 && state.timestamp.batch % p == 0;
      } else {
        const double p = std::ceil(interval.value() * max.value());
        const double now = state.timestamp.get(max.unit()).value(), before = prev.get(max.unit()).value();
        due = p > 0 && std::floor(before / p) != std::floor(now / p);
      }
    } else {
      double now, before;
      if (interval.unit() == TimeUnit::SECOND) {
        now = state.timestamp.total_wct.count();
        before = prev.total_wct.count();
      } else {
        now = state.timestamp.get(interval.unit()).value();
        before = prev.get(interval.unit()).value();
      }
      due = std::floor(before / interval.value()) != std::floor(now / interval.value());
    }
    if (due) *last_batch_seen = state.timestamp.batch;
    return due;
  };
}

}  // namespace composer
