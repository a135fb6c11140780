// The profiler's schedule: which batches it skips, warms up on and records (Composer's ProfilerAction and
// cyclic_schedule).
#pragma once

#include <torch/arg.h>

#include <cstdint>
#include <functional>
#include <optional>

namespace composer {

struct State;

/// What the profiler does at a batch. Composer's values: "skip", "warmup", "active", "active_and_save".
enum class ProfilerAction { SKIP, WARMUP, ACTIVE, ACTIVE_AND_SAVE };
const char* profiler_action_name(ProfilerAction action);

struct ProfilerOptions;

/// Composer's cyclic_schedule arguments.
struct CyclicScheduleOptions {
  /// Batches skipped at the start of every epoch (after the batch a resumed run starts at).
  TORCH_ARG(int64_t, skip_first) = 0;
  /// Batches skipped at the start of each cycle.
  TORCH_ARG(int64_t, wait) = 0;
  /// Batches of warm-up after the wait (markers run, the trace is not saved yet).
  TORCH_ARG(int64_t, warmup) = 1;
  /// Batches recorded after the warm-up; the last one saves the trace.
  TORCH_ARG(int64_t, active) = 4;
  /// Cycles per epoch; 0 repeats them for the whole epoch.
  TORCH_ARG(int64_t, repeat) = 1;

 public:
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("skip_first", self.skip_first_, "batches skipped at the start of every epoch");
    visit("wait", self.wait_, "batches skipped at the start of each cycle");
    visit("warmup", self.warmup_, "batches of warm-up after the wait");
    visit("active", self.active_, "batches recorded after the warm-up; the last saves the trace");
    visit("repeat", self.repeat_, "cycles per epoch; 0 repeats for the whole epoch");
  }
  /// Throws std::invalid_argument naming the field: each must be >= 0 and active >= 1.
  void validate() const;

 private:
  friend struct ProfilerOptions;  // its field list holds these as schedule.<name>
};

/// The action at batch `batch_in_epoch` (0-based) of an epoch of `dataloader_len` batches (unknown: nullopt), for a
/// run that resumed at batch `resumption_batch_idx` of its epoch (0 for a fresh run): Composer's cyclic_schedule.
/// The batch that ends a cycle, or the epoch, is ACTIVE_AND_SAVE.
ProfilerAction cyclic_schedule_action(const CyclicScheduleOptions& options, int64_t batch_in_epoch,
                                      int64_t resumption_batch_idx, std::optional<int64_t> dataloader_len);

/// A schedule: the action at the state's current batch, given the batch in the epoch the run resumed at.
using ProfilerSchedule = std::function<ProfilerAction(const State& state, int64_t resumption_batch_idx)>;

/// Composer's cyclic_schedule(skip_first, wait, warmup, active, repeat); validates the options.
ProfilerSchedule cyclic_schedule(CyclicScheduleOptions options = {});

}  // namespace composer
