#include "composer/callbacks/registry.h"

#include "composer/callbacks/lr_monitor.h"
#include "composer/callbacks/speed_monitor.h"
#include "composer/callbacks/threshold_stopper.h"
#include "composer/checkpoint/checkpoint_saver.h"

namespace composer::callbacks {

const CallbackRegistry& callback_registry() {
  static const CallbackRegistry registry(
      "callback",
      {
          registry_entry<Callback, CheckpointSaver, CheckpointSaverOptions>(
              "checkpoint_saver", "CheckpointSaver", "crash-safe checkpoints at an interval, with retention"),
          registry_entry<Callback, LRMonitor, NoOptions>("lr_monitor", "LRMonitor",
                                                         "lr-<Optimizer>/group<i> every batch"),
          registry_entry<Callback, SpeedMonitor, SpeedMonitorOptions>(
              "speed_monitor", "SpeedMonitor", "throughput/* and time/* over a window of batches"),
          registry_entry<Callback, ThresholdStopper, ThresholdStopperOptions>("threshold_stopper", "ThresholdStopper",
                                                                              "stop once a metric crosses a threshold"),
      });
  return registry;
}

}  // namespace composer::callbacks
