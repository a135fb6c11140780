// Interval schedulers: when an evaluator (or a checkpoint saver) is due, as Composer's create_interval_scheduler.
#pragma once

#include "composer/core/event.h"
#include "composer/core/time.h"

#include <torch/arg.h>

#include <functional>
#include <optional>
#include <set>

namespace composer {

struct State;

using IntervalScheduler = std::function<bool(const State& state, Event event)>;

struct IntervalSchedulerOptions {
  /// Also fire at a final event once training is complete (unless it already fired at that batch).
  TORCH_ARG(bool, include_end_of_training) = true;
  /// Fire at the *_CHECKPOINT events (the checkpoint saver); false: at BATCH_END / EPOCH_END / ITERATION_END
  /// (evaluators).
  TORCH_ARG(bool, checkpoint_events) = true;
  /// The events include_end_of_training fires at.
  TORCH_ARG(std::set<Event>, final_events) = std::set<Event>{Event::BATCH_CHECKPOINT, Event::EPOCH_CHECKPOINT};

 public:
  /// The keys a config sets; final_events is set in code.
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("include_end_of_training", self.include_end_of_training_, "also fire once training is complete");
    visit("checkpoint_events", self.checkpoint_events_,
          "fire at the *_CHECKPOINT events; false: at BATCH_END / EPOCH_END / ITERATION_END");
  }
};

/// `interval` in ep fires at EPOCH_CHECKPOINT (EPOCH_END without checkpoint_events); iter at ITERATION_*;
/// ba/sp/tok/dur/sec at BATCH_*. Fires when the count crosses a multiple of the interval, and per the options at
/// the end of training. Throws std::invalid_argument for a bad unit.
IntervalScheduler create_interval_scheduler(const Time& interval,
                                            const IntervalSchedulerOptions& options = IntervalSchedulerOptions());

}  // namespace composer
