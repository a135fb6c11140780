// MemoryMonitor: memory use after every training batch (Composer's MemoryMonitor, plus process RSS on CPU).
#pragma once

#include "composer/core/callback.h"

#include <torch/arg.h>

#include <map>
#include <optional>
#include <string>

namespace composer {

/// CUDA allocator statistic (torch.cuda.memory_stats()'s name) -> logged name.
using MemoryKeys = std::map<std::string, std::string>;

struct MemoryMonitorOptions {
  /// CUDA allocator statistic -> logged name; empty: Composer's table (allocated_bytes.all.current ->
  /// current_allocated_mem, ..., num_alloc_retries -> alloc_retries). Set from C++ only (not a config field).
  TORCH_ARG(MemoryKeys, memory_keys) = {};
  /// Every this many batches, also log <key>_avg, <key>_min and <key>_max over the ranks.
  TORCH_ARG(std::optional<int64_t>, dist_aggregate_batch_interval) = std::nullopt;

 public:
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("dist_aggregate_batch_interval", self.dist_aggregate_batch_interval_,
          "every this many batches also log the average, minimum and maximum over the ranks");
  }
};

/// At AFTER_TRAIN_BATCH logs memory/<name> for each statistic, bytes in gigabytes (1e9) rounded to five significant
/// digits as Composer does. On CUDA: the caching allocator's statistics of the model's device
/// (memory/current_allocated_mem, memory/peak_reserved_mem, memory/alloc_retries, ...). On CPU, where Composer logs
/// nothing: the process's memory/current_rss_mem and memory/peak_rss_mem (VmRSS and VmHWM of /proc/self/status).
class MemoryMonitor : public Callback {
 public:
  /// Throws std::invalid_argument for a dist_aggregate_batch_interval below 1.
  explicit MemoryMonitor(MemoryMonitorOptions options = {});
  void after_train_batch(State& state, Logger& logger) override;

  /// The report for a device (what after_train_batch logs, without the "memory/" prefix or the dist aggregates).
  std::map<std::string, double> report(const c10::Device& device) const;

 private:
  MemoryMonitorOptions options_;
};

/// Composer's rounding of a byte count to gigabytes: bytes / 1e9 to five significant digits.
double bytes_to_rounded_gigabytes(double bytes);

}  // namespace composer
