// Engine: runs algorithms and callbacks at each event, in Composer's order.
#pragma once

#include "composer/core/event.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace composer {

struct State;
class Logger;
class Algorithm;

/// Reorders the algorithms that matched an event.
using AlgorithmPass = std::function<void(std::vector<std::shared_ptr<Algorithm>>& algorithms, Event event)>;

/// Built-in passes, applied in this order before user passes.
void sort_selective_backprop_first(std::vector<std::shared_ptr<Algorithm>>& algorithms, Event event);
void sort_low_precision_layernorm_last(std::vector<std::shared_ptr<Algorithm>>& algorithms, Event event);
/// Reverses the order for events whose name starts with AFTER_ (first in, last out).
void set_filo_order(std::vector<std::shared_ptr<Algorithm>>& algorithms, Event event);

/// Sees the engine's work (the profiler's markers): each event's begin and end around its algorithms and callbacks,
/// and each algorithm ("algorithm") or callback ("callback") run within it, by class name.
class EngineObserver {
 public:
  virtual ~EngineObserver() = default;
  virtual void event_begin(Event event) = 0;
  virtual void event_end(Event event) = 0;
  virtual void component_begin(Event event, const char* kind, const std::string& name) = 0;
  virtual void component_end(Event event, const char* kind, const std::string& name) = 0;
};

/// Contract: INIT runs logger destinations, then other callbacks, then algorithms; every other event runs
/// algorithms (after the passes), then non-logger callbacks, then logger destinations. A closed engine rejects
/// events.
class Engine {
 public:
  Engine(State& state, Logger& logger);
  ~Engine();

  void run_event(Event event);
  /// Algorithms that join after INIT (those a loaded checkpoint requires, Composer's autoload): appended to
  /// state.algorithms, then INIT runs for them alone (matched, ordered by the passes, traced). Throws
  /// std::invalid_argument when the passes order one of them before an algorithm that already ran at INIT.
  void add_late_algorithms(const std::vector<std::shared_ptr<Algorithm>>& algorithms);
  /// Appends a user pass, or inserts it at `index` among the passes.
  void register_pass(AlgorithmPass pass, int index = -1);
  /// Log `algorithm_traces/<Cls>/Event.<NAME>: 1` (Composer's key) for every algorithm run.
  void set_log_traces(bool on) { log_traces_ = on; }
  /// The observer told of every event, algorithm and callback run (not owned; nullptr: none).
  void set_observer(EngineObserver* observer) { observer_ = observer; }
  /// Calls close() on every callback, then post_close() on those whose close() did not throw. Idempotent.
  void close();
  bool closed() const { return closed_; }

 private:
  void run_algorithms(Event event);
  /// `algorithms` matched at `event`, in the order of the built-in and user passes.
  std::vector<std::shared_ptr<Algorithm>> ordered(Event event,
                                                  const std::vector<std::shared_ptr<Algorithm>>& algorithms);
  void apply(Event event, const std::vector<std::shared_ptr<Algorithm>>& matched);
  void run_callbacks(Event event, bool loggers_first);
  void check_state(Event event) const;

  State& state_;
  Logger& logger_;
  std::vector<AlgorithmPass> passes_;
  bool log_traces_ = false;
  EngineObserver* observer_ = nullptr;
  bool closed_ = false;
};

}  // namespace composer
