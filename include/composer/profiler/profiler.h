// Profiler: Composer's profiler — a schedule, markers for every paired engine event, algorithm and callback, trace
// handlers that write them, a system-metrics sampler and LibTorch's Kineto profiler merged into the same trace.
#pragma once

#include "composer/core/engine.h"
#include "composer/profiler/marker.h"
#include "composer/profiler/profiler_schedule.h"
#include "composer/profiler/trace_handler.h"

#include <torch/arg.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace composer {

class Callback;
struct State;

/// Composer's Profiler arguments (but the schedule and the trace handlers, which are objects); `schedule.*` are the
/// cyclic schedule's, used when the Profiler is made from these options alone (the CLI's `profiler:` section).
struct ProfilerOptions {
  TORCH_ARG(CyclicScheduleOptions, schedule);
  /// The system profiler's CPU counter ("cpu": cpu_percent).
  TORCH_ARG(bool, sys_prof_cpu) = true;
  /// Its memory counters (memory/cuda/<allocator statistic> on a GPU, memory/swap, memory/virtual).
  TORCH_ARG(bool, sys_prof_memory) = false;
  /// Its per-disk I/O counters (disk/<disk>/<field>).
  TORCH_ARG(bool, sys_prof_disk) = false;
  /// Its per-interface network counters (network/<nic>/kb_sent, kb_recv).
  TORCH_ARG(bool, sys_prof_net) = false;
  /// Seconds between the system profiler's samples.
  TORCH_ARG(double, sys_prof_stats_thread_interval_seconds) = 0.5;
  /// The Kineto traces' folder and file name (format variables: {run_name} {rank} {epoch} {batch} ...).
  TORCH_ARG(std::string, torch_prof_folder) = "{run_name}/torch_traces";
  TORCH_ARG(std::string, torch_prof_filename) = "rank{rank}.{batch}.pt.trace.json";
  /// Uploaded through the loggers that take files; empty: not uploaded.
  TORCH_ARG(std::string, torch_prof_remote_file_name) = "{run_name}/torch_traces/rank{rank}.{batch}.pt.trace.json";
  /// Allow a non-empty torch_prof_folder (else the run stops at INIT, nothing overwritten).
  TORCH_ARG(bool, torch_prof_overwrite) = false;
  /// Write the Kineto traces gzipped (".gz" appended).
  TORCH_ARG(bool, torch_prof_use_gzip) = false;
  TORCH_ARG(bool, torch_prof_record_shapes) = false;
  TORCH_ARG(bool, torch_prof_profile_memory) = true;
  TORCH_ARG(bool, torch_prof_with_stack) = false;
  TORCH_ARG(bool, torch_prof_with_flops) = true;
  /// Kineto traces kept on disk (oldest deleted first); -1 keeps all.
  TORCH_ARG(int64_t, torch_prof_num_traces_to_keep) = -1;

 public:
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("schedule.skip_first", self.schedule_.skip_first_, "batches skipped at the start of every epoch");
    visit("schedule.wait", self.schedule_.wait_, "batches skipped at the start of each cycle");
    visit("schedule.warmup", self.schedule_.warmup_, "batches of warm-up after the wait");
    visit("schedule.active", self.schedule_.active_, "batches recorded after the warm-up; the last saves the trace");
    visit("schedule.repeat", self.schedule_.repeat_, "cycles per epoch; 0 repeats for the whole epoch");
    visit("sys_prof_cpu", self.sys_prof_cpu_, "system profiler: the cpu_percent counter");
    visit("sys_prof_memory", self.sys_prof_memory_, "system profiler: memory counters");
    visit("sys_prof_disk", self.sys_prof_disk_, "system profiler: per-disk I/O counters");
    visit("sys_prof_net", self.sys_prof_net_, "system profiler: per-interface network counters");
    visit("sys_prof_stats_thread_interval_seconds", self.sys_prof_stats_thread_interval_seconds_,
          "seconds between system samples");
    visit("torch_prof_folder", self.torch_prof_folder_, "folder of the Kineto traces");
    visit("torch_prof_filename", self.torch_prof_filename_, "file name of each Kineto trace");
    visit("torch_prof_remote_file_name", self.torch_prof_remote_file_name_, "uploaded as (empty: not uploaded)");
    visit("torch_prof_overwrite", self.torch_prof_overwrite_, "allow a non-empty torch_prof_folder");
    visit("torch_prof_use_gzip", self.torch_prof_use_gzip_, "gzip the Kineto traces");
    visit("torch_prof_record_shapes", self.torch_prof_record_shapes_, "Kineto: record input shapes");
    visit("torch_prof_profile_memory", self.torch_prof_profile_memory_, "Kineto: record allocations");
    visit("torch_prof_with_stack", self.torch_prof_with_stack_, "Kineto: record stacks");
    visit("torch_prof_with_flops", self.torch_prof_with_flops_, "Kineto: estimate flops");
    visit("torch_prof_num_traces_to_keep", self.torch_prof_num_traces_to_keep_, "Kineto traces kept; -1 all");
  }
  /// Throws std::invalid_argument naming the field.
  void validate() const;
  /// Composer's rule: the Kineto profiler runs when any torch_prof_{record_shapes, profile_memory, with_stack,
  /// with_flops} is set.
  bool torch_profiler_enabled() const {
    return torch_prof_record_shapes_ || torch_prof_profile_memory_ || torch_prof_with_stack_ || torch_prof_with_flops_;
  }
  bool system_profiler_enabled() const { return sys_prof_cpu_ || sys_prof_memory_ || sys_prof_disk_ || sys_prof_net_; }
};

/// Give it to TrainerOptions::profiler. The engine reports to it (it is the engine's observer): each paired event
/// (BATCH_START..BATCH_END is `event/batch`, BEFORE_FORWARD..AFTER_FORWARD `event/forward`, ...) is a duration
/// marker, recorded while the schedule says WARMUP, ACTIVE or ACTIVE_AND_SAVE (and always for event/fit and
/// event/epoch); each algorithm and callback run is `algorithm/<Class>/event/<event>` or
/// `callback/<Class>/event/<event>`.
class Profiler : public EngineObserver {
 public:
  Profiler(ProfilerSchedule schedule, std::vector<std::shared_ptr<TraceHandler>> trace_handlers,
           ProfilerOptions options = {});
  /// The cyclic schedule of options.schedule().
  explicit Profiler(std::vector<std::shared_ptr<TraceHandler>> trace_handlers, ProfilerOptions options = {});

  /// Binds to the trainer's state (once); returns the callbacks the trainer adds: the system profiler and the torch
  /// profiler (as the options enable them), then the trace handlers.
  std::vector<std::shared_ptr<Callback>> bind_to_state(State& state);

  /// The schedule's action at the state now (training thread).
  ProfilerAction action() const;
  /// The action at the last engine event (any thread).
  ProfilerAction last_action() const { return last_action_.load(); }

  /// The marker of this name, made on first use; later calls update its categories (Composer's Profiler.marker).
  Marker& marker(const std::string& name,
                 std::vector<ProfilerAction> actions = {ProfilerAction::WARMUP, ProfilerAction::ACTIVE,
                                                        ProfilerAction::ACTIVE_AND_SAVE},
                 bool record_instant_on_start = false, bool record_instant_on_finish = false,
                 std::vector<std::string> categories = {});

  /// Hands a Chrome JSON trace to every trace handler (Composer's record_chrome_json_trace_file).
  void record_chrome_json_trace_file(const std::string& path, double ts_shift_us = 0.0);

  const std::vector<std::shared_ptr<TraceHandler>>& trace_handlers() const { return trace_handlers_; }
  const ProfilerOptions& options() const { return options_; }
  /// The batch in the epoch a resumed run started at (set at AFTER_LOAD), which the schedule skips past.
  int64_t resumption_batch_idx() const { return resumption_batch_idx_; }
  /// The bound state; throws std::logic_error before bind_to_state.
  const State& state() const;

  void event_begin(Event event) override;
  void event_end(Event event) override;
  void component_begin(Event event, const char* kind, const std::string& name) override;
  void component_end(Event event, const char* kind, const std::string& name) override;

 private:
  ProfilerSchedule schedule_;
  std::vector<std::shared_ptr<TraceHandler>> trace_handlers_;
  ProfilerOptions options_;
  State* state_ = nullptr;
  std::mutex markers_mutex_;
  std::map<std::string, std::unique_ptr<Marker>> markers_;
  std::atomic<ProfilerAction> last_action_{ProfilerAction::SKIP};
  int64_t resumption_batch_idx_ = 0;
};

}  // namespace composer
