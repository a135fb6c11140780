#include "composer/profiler/marker.h"

#include "composer/core/state.h"
#include "composer/profiler/profiler.h"
#include "profiler/detail/trace_files.h"

#include <algorithm>
#include <stdexcept>

namespace composer {
Marker::Marker(Profiler& profiler, std::string name, std::vector<ProfilerAction> actions, bool record_instant_on_start,
               bool record_instant_on_finish, std::vector<std::string> categories)
    : profiler_(profiler),
      name_(std::move(name)),
      actions_(std::move(actions)),
      record_instant_on_start_(record_instant_on_start),
      record_instant_on_finish_(record_instant_on_finish),
      categories_(std::move(categories)) {}

bool Marker::should_record(ProfilerAction action) const {
  return std::find(actions_.begin(), actions_.end(), action) != actions_.end();
}

void Marker::start() {
  if (started_) throw std::logic_error("profiler marker " + name_ + ": start() while it is already started");
  recorded_start_ = should_record(profiler_.action());
  if (recorded_start_) {
    const int64_t now = detail::wall_clock_ns();
    const Timestamp& t = profiler_.state().timestamp;
    for (const auto& h : profiler_.trace_handlers()) h->process_duration_event(name_, categories_, true, t, now);
    if (record_instant_on_start_)
      for (const auto& h : profiler_.trace_handlers()) h->process_instant_event(name_, categories_, t, now);
  }
  started_ = true;
}

void Marker::finish() {
  if (!started_) throw std::logic_error("profiler marker " + name_ + ": finish() before start()");
  started_ = false;
  if (!recorded_start_) return;
  const int64_t now = detail::wall_clock_ns();
  const Timestamp& t = profiler_.state().timestamp;
  for (const auto& h : profiler_.trace_handlers()) h->process_duration_event(name_, categories_, false, t, now);
  if (record_instant_on_finish_)
    for (const auto& h : profiler_.trace_handlers()) h->process_instant_event(name_, categories_, t, now);
}

void Marker::instant() {
  if (!should_record(profiler_.action())) return;
  const int64_t now = detail::wall_clock_ns();
  for (const auto& h : profiler_.trace_handlers())
    h->process_instant_event(name_, categories_, profiler_.state().timestamp, now);
}

void Marker::counter(const std::map<std::string, double>& values) {
  if (!should_record(profiler_.last_action())) return;
  const int64_t now = detail::wall_clock_ns();
  for (const auto& h : profiler_.trace_handlers()) h->process_counter_event(name_, categories_, now, values);
}

}  // namespace composer
