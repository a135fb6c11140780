#include "composer/callbacks/memory_monitor.h"

#include "composer/core/logger.h"
#include "composer/core/state.h"
#include "composer/dist/dist.h"
#include "composer/dist/env.h"

#include <ATen/ATen.h>
#if __has_include(<c10/cuda/CUDACachingAllocator.h>)
#include <c10/cuda/CUDACachingAllocator.h>
#define COMPOSER_MEMORY_MONITOR_CUDA 1
#endif

#include <cmath>
#include <fstream>
#include <stdexcept>
#include <vector>

namespace composer {

namespace {

const std::map<std::string, std::string>& composer_memory_keys() {
  static const std::map<std::string, std::string> keys = {
      {"allocated_bytes.all.current", "current_allocated_mem"},
      {"active_bytes.all.current", "current_active_mem"},
      {"inactive_split_bytes.all.current", "current_inactive_mem"},
      {"reserved_bytes.all.current", "current_reserved_mem"},
      {"allocated_bytes.all.peak", "peak_allocated_mem"},
      {"active_bytes.all.peak", "peak_active_mem"},
      {"inactive_split_bytes.all.peak", "peak_inactive_mem"},
      {"reserved_bytes.all.peak", "peak_reserved_mem"},
      {"num_alloc_retries", "alloc_retries"},
  };
  return keys;
}

#ifdef COMPOSER_MEMORY_MONITOR_CUDA
/// torch.cuda.memory_stats()'s names for what the report needs.
std::map<std::string, double> cuda_memory_stats(c10::DeviceIndex device) {
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device);
  const size_t all = 0;  // StatType::AGGREGATE
  std::map<std::string, double> out;
  const auto put = [&](const std::string& name, const auto& stat) {
    out[name + ".all.current"] = static_cast<double>(stat[all].current);
    out[name + ".all.peak"] = static_cast<double>(stat[all].peak);
  };
  put("allocated_bytes", stats.allocated_bytes);
  put("active_bytes", stats.active_bytes);
  put("inactive_split_bytes", stats.inactive_split_bytes);
  put("reserved_bytes", stats.reserved_bytes);
  out["num_alloc_retries"] = static_cast<double>(stats.num_alloc_retries);
  out["num_ooms"] = static_cast<double>(stats.num_ooms);
  return out;
}
#endif

/// VmRSS and VmHWM of /proc/self/status, in bytes (absent where the file is).
std::map<std::string, double> process_memory() {
  std::map<std::string, double> out;
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    const auto field = [&](const std::string& name, const std::string& key) {
      if (line.rfind(name, 0) == 0) out[key] = std::stod(line.substr(name.size())) * 1024.0;  // "VmRSS:  123 kB"
    };
    field("VmRSS:", "current_rss_mem");
    field("VmHWM:", "peak_rss_mem");
  }
  return out;
}

}  // namespace

double bytes_to_rounded_gigabytes(double bytes) {
  const double gigabytes = bytes / 1.0e9;
  if (gigabytes == 0) return 0.0;
  const int magnitude = static_cast<int>(std::floor(std::log10(std::abs(gigabytes))));
  const double scale = std::pow(10.0, 4 - magnitude);
  return std::nearbyint(gigabytes * scale) / scale;  // Python's round: half to even
}

MemoryMonitor::MemoryMonitor(MemoryMonitorOptions options) : options_(std::move(options)) {
  const auto interval = options_.dist_aggregate_batch_interval();
  if (interval && *interval < 1)
    throw std::invalid_argument("MemoryMonitor.dist_aggregate_batch_interval is " + std::to_string(*interval) +
                                ", expected >= 1 (or unset)");
}

std::map<std::string, double> MemoryMonitor::report(const c10::Device& device) const {
  std::map<std::string, double> out;
  if (device.is_cuda()) {
#ifdef COMPOSER_MEMORY_MONITOR_CUDA
    const auto stats = cuda_memory_stats(device.index() < 0 ? 0 : device.index());
    const auto& keys = options_.memory_keys().empty() ? composer_memory_keys() : options_.memory_keys();
    for (const auto& [torch_name, name] : keys) {
      auto it = stats.find(torch_name);
      if (it == stats.end()) continue;
      if (torch_name.find("bytes") != std::string::npos) {
        std::string key = name;
        if (auto pos = key.find("bytes"); pos != std::string::npos) key.replace(pos, 5, "gigabytes");
        out[key] = bytes_to_rounded_gigabytes(it->second);
      } else {
        out[name] = it->second;
      }
    }
#endif
    return out;
  }
  for (const auto& [name, bytes] : process_memory()) out[name] = bytes_to_rounded_gigabytes(bytes);
  return out;
}

void MemoryMonitor::after_train_batch(State& state, Logger& logger) {
  std::map<std::string, double> values = report(state.device);
  const auto interval = options_.dist_aggregate_batch_interval();
  if (interval && state.timestamp.batch % *interval == 0 && !values.empty()) {
    // Every statistic in one tensor (the map's order, the same on every rank): one all-reduce per operation.
    std::vector<double> local;
    for (const auto& [name, v] : values) local.push_back(v);
    const auto reduce = [&](dist::ReduceOp op) {
      at::Tensor t = at::tensor(local, at::TensorOptions().dtype(at::kDouble)).to(state.device);
      if (dist::is_initialized()) dist::all_reduce(t, op);
      return t.cpu();
    };
    const at::Tensor sum = reduce(dist::ReduceOp::SUM), min = reduce(dist::ReduceOp::MIN),
                     max = reduce(dist::ReduceOp::MAX);
    const double world = static_cast<double>(dist::get_world_size());
    std::map<std::string, double> aggregates;
    int64_t i = 0;
    for (const auto& [name, v] : values) {
      aggregates[name + "_avg"] = sum[i].item<double>() / world;
      aggregates[name + "_min"] = min[i].item<double>();
      aggregates[name + "_max"] = max[i].item<double>();
      ++i;
    }
    values.insert(aggregates.begin(), aggregates.end());
  }
  std::map<std::string, double> metrics;
  for (const auto& [name, v] : values) metrics["memory/" + name] = v;
  if (!metrics.empty()) logger.log_metrics(metrics);
}

}  // namespace composer
