#include "composer/callbacks/registry.h"

#include "composer/callbacks/activation_monitor.h"
#include "composer/callbacks/early_stopper.h"
#include "composer/callbacks/export_for_inference.h"
#include "composer/callbacks/free_outputs.h"
#include "composer/callbacks/generate.h"
#include "composer/callbacks/image_visualizer.h"
#include "composer/callbacks/load_checkpoint.h"
#include "composer/callbacks/lr_monitor.h"
#include "composer/callbacks/memory_monitor.h"
#include "composer/callbacks/nan_monitor.h"
#include "composer/callbacks/optimizer_monitor.h"
#include "composer/callbacks/runtime_estimator.h"
#include "composer/callbacks/speed_monitor.h"
#include "composer/callbacks/system_metrics_monitor.h"
#include "composer/callbacks/threshold_stopper.h"
#include "composer/checkpoint/checkpoint_saver.h"

namespace composer::callbacks {

const CallbackRegistry& callback_registry() {
  static const CallbackRegistry registry(
      "callback",
      {
          registry_entry<Callback, ActivationMonitor, ActivationMonitorOptions>(
              "activation_monitor", "ActivationMonitor", "activations/* statistics of every layer at an interval"),
          registry_entry<Callback, CheckpointSaver, CheckpointSaverOptions>(
              "checkpoint_saver", "CheckpointSaver", "crash-safe checkpoints at an interval, with retention"),
          registry_entry<Callback, EarlyStopper, EarlyStopperOptions>(
              "early_stopper", "EarlyStopper", "stop when a metric has not improved for `patience`"),
          registry_entry<Callback, ExportForInferenceCallback, ExportForInferenceOptions>(
              "export_for_inference", "ExportForInferenceCallback",
              "the trained model as TorchScript or safetensors at the end of training"),
          registry_entry<Callback, FreeOutputs, NoOptions>("free_outputs", "FreeOutputs",
                                                           "drop the model's outputs after the loss"),
          registry_entry<Callback, Generate, GenerateOptions>("generate", "Generate",
                                                              "text from prompts at an interval, as a table"),
          registry_entry<Callback, ImageVisualizer, ImageVisualizerOptions>(
              "image_visualizer", "ImageVisualizer", "Images/Train and Images/Eval: a few of the batch's images"),
          registry_entry<Callback, LoadCheckpoint, LoadCheckpointOptions>(
              "load_checkpoint", "LoadCheckpoint", "load a checkpoint into the State at an event"),
          registry_entry<Callback, LRMonitor, NoOptions>("lr_monitor", "LRMonitor",
                                                         "lr-<Optimizer>/group<i> every batch"),
          registry_entry<Callback, MemoryMonitor, MemoryMonitorOptions>(
              "memory_monitor", "MemoryMonitor", "memory/* after every batch: CUDA allocator statistics, or RSS"),
          registry_entry<Callback, NaNMonitor, NoOptions>("nan_monitor", "NaNMonitor",
                                                          "stop with an error when a training loss is NaN"),
          registry_entry<Callback, OptimizerMonitor, OptimizerMonitorOptions>(
              "optimizer_monitor", "OptimizerMonitor", "l2_norm/grad/* per parameter and global, optimizer norms"),
          registry_entry<Callback, RuntimeEstimator, RuntimeEstimatorOptions>(
              "runtime_estimator", "RuntimeEstimator", "time/remaining_estimate, the training time left"),
          registry_entry<Callback, SpeedMonitor, SpeedMonitorOptions>(
              "speed_monitor", "SpeedMonitor", "throughput/* and time/* over a window of batches"),
          registry_entry<Callback, SystemMetricsMonitor, SystemMetricsMonitorOptions>(
              "system_metrics_monitor", "SystemMetricsMonitor", "CPU, memory, disk and network counters every batch"),
          registry_entry<Callback, ThresholdStopper, ThresholdStopperOptions>("threshold_stopper", "ThresholdStopper",
                                                                              "stop once a metric crosses a threshold"),
      });
  return registry;
}

}  // namespace composer::callbacks
