// Marker: a named region, instant or counter in the profiler's trace (Composer's Marker).
#pragma once

#include "composer/profiler/profiler_schedule.h"

#include <map>
#include <string>
#include <vector>

namespace composer {

class Profiler;

/// Made by Profiler::marker (one per name). start()/finish() record a duration event when the schedule's action at
/// start() is one of `actions` (the finish is recorded exactly when the start was, so the trace stays balanced);
/// instant() and counter() record when the action now is one of them.
class Marker {
 public:
  Marker(Profiler& profiler, std::string name, std::vector<ProfilerAction> actions, bool record_instant_on_start,
         bool record_instant_on_finish, std::vector<std::string> categories);

  /// Throws std::logic_error when already started.
  void start();
  /// Throws std::logic_error when not started.
  void finish();
  void instant();
  /// A counter event (thread-safe: reads the action the profiler cached at the last engine event).
  void counter(const std::map<std::string, double>& values);

  /// start() now, finish() when it goes out of scope (Composer's `with marker:`).
  class Scope {
   public:
    explicit Scope(Marker& marker) : marker_(&marker) { marker_->start(); }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    ~Scope() {
      if (marker_ && marker_->started()) marker_->finish();
    }

   private:
    Marker* marker_;
  };
  Scope scope() { return Scope(*this); }

  const std::string& name() const { return name_; }
  bool started() const { return started_; }
  void set_categories(std::vector<std::string> categories) { categories_ = std::move(categories); }
  void set_actions(std::vector<ProfilerAction> actions) { actions_ = std::move(actions); }

 private:
  bool should_record(ProfilerAction action) const;

  Profiler& profiler_;
  std::string name_;
  std::vector<ProfilerAction> actions_;
  bool record_instant_on_start_;
  bool record_instant_on_finish_;
  std::vector<std::string> categories_;
  bool started_ = false;
  bool recorded_start_ = false;
};

}  // namespace composer
