// The step closure's gradient-sync switch: Composer's closure(ddp_sync=False). An optimizer that runs the closure
// more than once (SAMOptimizer) holds a NoSyncClosure around a run whose gradients must stay on each rank (its
// ascent step perturbs each rank's weights by that rank's own gradient); TrainStep's closure then skips the
// gradient all-reduce on every microbatch instead of syncing on the last.
#pragma once

namespace composer::optim {

class NoSyncClosure {
 public:
  NoSyncClosure() : previous_(active_) { active_ = true; }
  ~NoSyncClosure() { active_ = previous_; }
  NoSyncClosure(const NoSyncClosure&) = delete;
  NoSyncClosure& operator=(const NoSyncClosure&) = delete;
  /// Whether closures run now should keep their gradients local.
  static bool active() { return active_; }

 private:
  static inline thread_local bool active_ = false;
  bool previous_;
};

}  // namespace composer::optim
