// SpeedMonitor: throughput over a window of batches, and train/eval wall time.
#pragma once

#include "composer/core/callback.h"
#include "composer/core/precision.h"

#include <torch/arg.h>

#include <deque>
#include <optional>
#include <string>

namespace composer {

struct SpeedMonitorOptions {
  TORCH_ARG(int64_t, window_size) = 100;
  TORCH_ARG(std::string, time_unit) = "hours";
  /// Peak flops per second of one device, for throughput/device/mfu; unset: Composer's table for the CUDA device
  /// and precision (gpu_flops_available()), none on CPU.
  TORCH_ARG(std::optional<double>, gpu_flops_available) = std::nullopt;

 public:
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("window_size", self.window_size_, "batches over which throughput is averaged");
    visit("time_unit", self.time_unit_, "unit of time/train, time/val, time/total: seconds, minutes, hours or days");
    visit("gpu_flops_available", self.gpu_flops_available_,
          "peak flops per second of one device for MFU; None: Composer's table for the GPU");
  }
};

/// At BATCH_END, once window_size batches have passed: throughput/{batches,samples,tokens}_per_sec,
/// throughput/device/* (divided by the world size), throughput/flops_per_sec when the model reports
/// flops_per_batch, and throughput/device/mfu (device flops per second / gpu_flops_available) when the peak is known;
/// always time/train, time/val, time/total in `time_unit` (seconds, minutes, hours, days).
class SpeedMonitor : public Callback {
 public:
  /// Throws std::invalid_argument naming a window_size <= 0 or an unknown time_unit.
  explicit SpeedMonitor(SpeedMonitorOptions options = {});
  explicit SpeedMonitor(int64_t window_size) : SpeedMonitor(SpeedMonitorOptions().window_size(window_size)) {}
  void init(State& state, Logger& logger) override;
  void batch_end(State& state, Logger& logger) override;
  void eval_end(State& state, Logger& logger) override;
  c10::IValue state_dict() const override;
  void load_state_dict(const c10::IValue& state) override;

 private:
  int64_t window_size_;
  double divider_;
  std::deque<double> samples_, tokens_, wct_, flops_;
  double total_eval_wct_ = 0.0;
  std::optional<double> gpu_flops_available_;
};

/// Composer's peak-flops table (GPU_AVAILABLE_FLOPS): a device named like torch.cuda.get_device_name()
/// ("NVIDIA H200", "NVIDIA A100-SXM4-80GB", "Tesla T4", ...) at a precision; nullopt when the device or the precision
/// is not in the table. Only dense flops (the datasheets' sparse numbers halved), as Composer's.
std::optional<double> gpu_flops_available(const std::string& device_name, Precision precision);

}  // namespace composer
