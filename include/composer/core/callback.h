// Callback: observes (and may change) the run at every event; one virtual method per event, as in Composer.
#pragma once

#include "composer/core/event.h"

#include <ATen/core/ivalue.h>

#include <string>

namespace composer {

struct State;
class Logger;

class Callback {
 public:
  virtual ~Callback() = default;
  /// Dispatches `event` to the method of the same name. Override to handle events generically.
  virtual void run_event(Event event, State& state, Logger& logger);

#define COMPOSER_CALLBACK_METHOD(name, method)        \
  virtual void method(State& state, Logger& logger) { \
    (void)state;                                      \
    (void)logger;                                     \
  }
  COMPOSER_FOR_EACH_EVENT(COMPOSER_CALLBACK_METHOD)
#undef COMPOSER_CALLBACK_METHOD

  /// Called once when the trainer closes (flush files, join threads).
  virtual void close(State& state, Logger& logger) {
    (void)state;
    (void)logger;
  }
  /// Called after every callback's close() that did not throw.
  virtual void post_close() {}

  /// True when this callback will write a checkpoint at `event` (a *_CHECKPOINT event) in this state: EMA swaps its
  /// averaged weights in first, as Composer's does for a CheckpointSaver whose save_interval is due.
  virtual bool will_save_checkpoint(const State& state, Event event) const {
    (void)state;
    (void)event;
    return false;
  }

  /// The class name, used as the key of this callback's state.
  virtual std::string name() const;
  /// State to checkpoint (an empty dict by default).
  virtual c10::IValue state_dict() const;
  virtual void load_state_dict(const c10::IValue& state) { (void)state; }
};

}  // namespace composer
