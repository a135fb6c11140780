// SystemMetricsMonitor: the machine's CPU, memory, disk and network counters at every batch (Composer's
// SystemMetricsMonitor, whose values come from psutil; these are read from /proc and statvfs with psutil's formulas).
#pragma once

#include "composer/core/callback.h"

#include <torch/arg.h>

#include <array>
#include <map>
#include <string>

namespace composer {

struct SystemMetricsMonitorOptions {
  /// Composer: log every rank's GPU values instead of the minimum and maximum. No GPU metrics here yet (see below),
  /// so it changes nothing; kept for configs written for Composer.
  TORCH_ARG(bool, log_all_data) = false;

 public:
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("log_all_data", self.log_all_data_, "log every rank's GPU values, not the minimum and maximum");
  }
};

/// At BATCH_START, EVAL_BATCH_START and PREDICT_BATCH_START logs, with psutil's names and formulas (Linux):
/// cpu_percentage (busy share of all CPUs since the last reading, 0 at the first), cpu_memory_{total, available,
/// percent, used, free, active, inactive, buffers, cached, shared, slab} (bytes, of /proc/meminfo),
/// disk_memory_{total, used, free, percent} (statvfs of /), network_{bytes_sent, bytes_recv, packets_sent,
/// packets_recv, errin, errout, dropin, dropout} (all interfaces of /proc/net/dev, since boot). Composer's NVML GPU
/// metrics (gpu_percentage, gpu_temperature_C, ...) are not collected.
class SystemMetricsMonitor : public Callback {
 public:
  explicit SystemMetricsMonitor(SystemMetricsMonitorOptions options = {});
  void batch_start(State& state, Logger& logger) override;
  void eval_batch_start(State& state, Logger& logger) override;
  void predict_batch_start(State& state, Logger& logger) override;

  /// One reading (what each of those events logs).
  std::map<std::string, double> compute_system_metrics();

 private:
  SystemMetricsMonitorOptions options_;
  std::array<double, 2> last_cpu_ = {0, 0};  // (total, busy) jiffies at the last reading
  bool have_cpu_ = false;
};

}  // namespace composer
