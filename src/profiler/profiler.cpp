#include "composer/profiler/profiler.h"

#include "composer/core/state.h"
#include "composer/profiler/system_profiler.h"
#include "composer/profiler/torch_profiler.h"

#include <stdexcept>

namespace composer {
namespace {

bool always_recorded(Event e) {
  return e == Event::INIT || e == Event::FIT_START || e == Event::EPOCH_START || e == Event::EPOCH_END;
}

}  // namespace

void ProfilerOptions::validate() const {
  schedule_.validate();
  if (!(sys_prof_stats_thread_interval_seconds_ > 0)) {
    throw std::invalid_argument("profiler sys_prof_stats_thread_interval_seconds: must be > 0 (got " +
                                std::to_string(sys_prof_stats_thread_interval_seconds_) + ")");
  }
  if (torch_prof_num_traces_to_keep_ < -1) {
    throw std::invalid_argument("profiler torch_prof_num_traces_to_keep: must be -1 (keep all) or >= 0 (got " +
                                std::to_string(torch_prof_num_traces_to_keep_) + ")");
  }
  if (torch_profiler_enabled() && (torch_prof_folder_.empty() || torch_prof_filename_.empty())) {
    throw std::invalid_argument("profiler torch_prof_folder and torch_prof_filename: must not be empty");
  }
}

Profiler::Profiler(ProfilerSchedule schedule, std::vector<std::shared_ptr<TraceHandler>> trace_handlers,
                   ProfilerOptions options)
    : schedule_(std::move(schedule)), trace_handlers_(std::move(trace_handlers)), options_(std::move(options)) {
  if (!schedule_) throw std::invalid_argument("Profiler: schedule must be set (e.g. cyclic_schedule())");
  for (const auto& h : trace_handlers_)
    if (!h) throw std::invalid_argument("Profiler: trace_handlers holds a null handler");
  options_.validate();
}

Profiler::Profiler(std::vector<std::shared_ptr<TraceHandler>> trace_handlers, ProfilerOptions options)
    : Profiler(cyclic_schedule(options.schedule()), std::move(trace_handlers), options) {}

std::vector<std::shared_ptr<Callback>> Profiler::bind_to_state(State& state) {
  if (state_ && state_ != &state) throw std::logic_error("Profiler: already bound to another trainer's state");
  state_ = &state;
  std::vector<std::shared_ptr<Callback>> callbacks;
  if (options_.system_profiler_enabled()) callbacks.push_back(std::make_shared<SystemProfiler>(*this));
  if (options_.torch_profiler_enabled()) callbacks.push_back(std::make_shared<TorchProfiler>(*this));
  for (const auto& h : trace_handlers_) {
    h->bind_profiler(this);
    callbacks.push_back(h);
  }
  return callbacks;
}

const State& Profiler::state() const {
  if (!state_) throw std::logic_error("Profiler: bind_to_state() must run before the profiler is used");
  return *state_;
}

ProfilerAction Profiler::action() const { return schedule_(state(), resumption_batch_idx_); }

Marker& Profiler::marker(const std::string& name, std::vector<ProfilerAction> actions, bool record_instant_on_start,
                         bool record_instant_on_finish, std::vector<std::string> categories) {
  std::lock_guard<std::mutex> lock(markers_mutex_);
  auto& slot = markers_[name];
  if (!slot) {
    slot = std::make_unique<Marker>(*this, name, std::move(actions), record_instant_on_start, record_instant_on_finish,
                                    std::move(categories));
  } else {
    slot->set_categories(std::move(categories));
  }
  return *slot;
}

void Profiler::record_chrome_json_trace_file(const std::string& path, double ts_shift_us) {
  for (const auto& h : trace_handlers_) h->process_chrome_json_trace_file(path, ts_shift_us);
}

void Profiler::event_begin(Event event) {
  last_action_.store(action());
  if (!is_after_event(event)) return;
  Marker& m = marker("event/" + canonical_name(event));
  if (m.started()) m.finish();
}

void Profiler::event_end(Event event) {
  if (event == Event::AFTER_LOAD) resumption_batch_idx_ = state().timestamp.batch_in_epoch;
  last_action_.store(action());
  if (!is_before_event(event)) return;
  std::vector<ProfilerAction> actions{ProfilerAction::WARMUP, ProfilerAction::ACTIVE, ProfilerAction::ACTIVE_AND_SAVE};
  if (always_recorded(event)) actions.push_back(ProfilerAction::SKIP);
  Marker& m = marker("event/" + canonical_name(event));
  m.set_actions(std::move(actions));
  if (!m.started()) m.start();
}

void Profiler::component_begin(Event event, const char* kind, const std::string& name) {
  const std::string value = event_value(event);
  Marker& m = marker(std::string(kind) + "/" + name + "/event/" + value,
                     {ProfilerAction::WARMUP, ProfilerAction::ACTIVE, ProfilerAction::ACTIVE_AND_SAVE}, false, false,
                     {value, name});
  if (!m.started()) m.start();  // one a throw left open is reused
}

void Profiler::component_end(Event event, const char* kind, const std::string& name) {
  Marker& m = marker(std::string(kind) + "/" + name + "/event/" + event_value(event), {}, false, false,
                     {event_value(event), name});
  if (m.started()) m.finish();
}

}  // namespace composer
