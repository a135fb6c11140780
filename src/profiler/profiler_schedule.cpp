#include "composer/profiler/profiler_schedule.h"

#include "composer/core/state.h"

#include <stdexcept>
#include <string>

namespace composer {

const char* profiler_action_name(ProfilerAction action) {
  switch (action) {
    case ProfilerAction::SKIP:
      return "skip";
    case ProfilerAction::WARMUP:
      return "warmup";
    case ProfilerAction::ACTIVE:
      return "active";
    case ProfilerAction::ACTIVE_AND_SAVE:
      return "active_and_save";
  }
  return "unknown";
}

void CyclicScheduleOptions::validate() const {
  for_each_field(*this, [](const char* name, int64_t value, const char*) {
    if (value < 0) {
      throw std::invalid_argument(std::string("profiler schedule ") + name + ": must be >= 0 (got " +
                                  std::to_string(value) + ")");
    }
  });
  if (active_ < 1) {
    throw std::invalid_argument("profiler schedule active: must be >= 1, a cycle must record a batch (got " +
                                std::to_string(active_) + ")");
  }
}

ProfilerAction cyclic_schedule_action(const CyclicScheduleOptions& o, int64_t batch_in_epoch,
                                      int64_t resumption_batch_idx, std::optional<int64_t> dataloader_len) {
  const int64_t cycle_len = o.wait() + o.warmup() + o.active();
  const int64_t skip = o.skip_first() + resumption_batch_idx;
  if (batch_in_epoch < skip) return ProfilerAction::SKIP;
  if (o.repeat() != 0 && batch_in_epoch >= cycle_len * o.repeat() + skip) return ProfilerAction::SKIP;
  const int64_t position = (batch_in_epoch - skip) % cycle_len;
  if (position < o.wait()) return ProfilerAction::SKIP;
  if (position < o.wait() + o.warmup()) return ProfilerAction::WARMUP;
  const bool last_in_epoch = dataloader_len && batch_in_epoch == *dataloader_len - 1;
  if (position == cycle_len - 1 || last_in_epoch) return ProfilerAction::ACTIVE_AND_SAVE;
  return ProfilerAction::ACTIVE;
}

ProfilerSchedule cyclic_schedule(CyclicScheduleOptions options) {
  options.validate();
  return [options](const State& state, int64_t resumption_batch_idx) {
    return cyclic_schedule_action(options, state.timestamp.batch_in_epoch, resumption_batch_idx, state.dataloader_len);
  };
}

}  // namespace composer
