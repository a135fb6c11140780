// Interval schedulers: when an evaluator (or a checkpoint saver) is due, as Composer's create_interval_scheduler.
#pragma once

#include "composer/core/event.h"
#include "composer/core/time.h"

#include <functional>
#include <optional>
#include <set>

namespace composer {

struct State;

using IntervalScheduler = std::function<bool(const State& state, Event event)>;

/// `interval` in ep fires at EPOCH_CHECKPOINT (EPOCH_END when !checkpoint_events); iter at ITERATION_*;
/// ba/sp/tok/dur/sec at BATCH_*. Fires when the count crosses a multiple of the interval, and (when
/// include_end_of_training) at a final event once training is complete, unless it already fired at that batch.
/// Default final events: {BATCH_CHECKPOINT, EPOCH_CHECKPOINT}. Throws std::invalid_argument for a bad unit.
IntervalScheduler create_interval_scheduler(const Time& interval, bool include_end_of_training = true,
                                            bool checkpoint_events = true,
                                            std::optional<std::set<Event>> final_events = std::nullopt);

}  // namespace composer
