#include "composer/callbacks/speed_monitor.h"

#include "callbacks/detail/time_divider.h"
#include "composer/core/logger.h"
#include "composer/core/serialization.h"
#include "composer/core/state.h"
#include "composer/dist/env.h"
#include "composer/models/composer_model.h"

#if __has_include(<ATen/cuda/CUDAContext.h>) && __has_include(<cuda_runtime_api.h>)
#include <ATen/cuda/CUDAContext.h>
#define COMPOSER_SPEED_MONITOR_CUDA 1
#endif

#include <algorithm>
#include <cctype>
#include <iostream>
#include <stdexcept>

namespace composer {

namespace {

/// Peak dense flops per second by precision (fp32, amp_fp16, amp_bf16): Composer's GPU_AVAILABLE_FLOPS, from the
/// NVIDIA datasheets.
struct PeakFlops {
  const char* device;
  double fp32, amp_fp16, amp_bf16;  // 0: not in the table
};
constexpr PeakFlops kPeakFlops[] = {
    {"h200-sxm", 67e12, 1.979e15 / 2, 1.979e15 / 2},
    {"h100-sxm", 67e12, 1.979e15 / 2, 1.979e15 / 2},
    {"h100-pcie", 51e12, 1.513e15 / 2, 1.513e15 / 2},
    {"a100", 19.5e12, 312e12, 312e12},
    {"a10", 31.2e12, 125e12, 125e12},
    {"v100-sxm", 15.7e12, 125e12, 0},
    {"v100-pcie", 14e12, 112e12, 0},
    {"t4", 8.1e12, 65e12, 0},
};

bool has(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

}  // namespace

std::optional<double> gpu_flops_available(const std::string& device_name, Precision precision) {
  std::string name = device_name;
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  // Composer's order of tests on the lower-cased name.
  if (has(name, "h200"))
    name = "h200-sxm";
  else if (has(name, "h100") && has(name, "hbm3"))
    name = "h100-sxm";
  else if (has(name, "h100") && (has(name, "pcie") || has(name, "hbm2e")))
    name = "h100-pcie";
  else if (has(name, "a100"))
    name = "a100";
  else if (has(name, "a10"))
    name = "a10";
  else if (has(name, "v100-sxm"))
    name = "v100-sxm";
  else if (has(name, "v100-pcie"))
    name = "v100-pcie";
  else if (has(name, "t4"))
    name = "t4";
  for (const auto& row : kPeakFlops) {
    if (name != row.device) continue;
    const double flops = precision == Precision::FP32       ? row.fp32
                         : precision == Precision::AMP_FP16 ? row.amp_fp16
                                                            : row.amp_bf16;
    if (flops > 0) return static_cast<double>(static_cast<int64_t>(flops));  // Composer takes int()
  }
  return std::nullopt;
}

SpeedMonitor::SpeedMonitor(SpeedMonitorOptions options)
    : window_size_(options.window_size()),
      divider_(callbacks::detail::seconds_per(options.time_unit(), "SpeedMonitor")),
      gpu_flops_available_(options.gpu_flops_available()) {
  if (window_size_ <= 0)
    throw std::invalid_argument("SpeedMonitor.window_size must be > 0, got " + std::to_string(window_size_));
  if (gpu_flops_available_ && *gpu_flops_available_ <= 0)
    throw std::invalid_argument("SpeedMonitor.gpu_flops_available must be > 0, got " +
                                std::to_string(*gpu_flops_available_));
}

void SpeedMonitor::init(State& state, Logger&) {
  if (gpu_flops_available_ || !state.device.is_cuda()) return;
#ifdef COMPOSER_SPEED_MONITOR_CUDA
  const auto* props = at::cuda::getDeviceProperties(state.device.index() < 0 ? 0 : state.device.index());
  gpu_flops_available_ = gpu_flops_available(props->name, state.precision);
  if (!gpu_flops_available_)
    std::cerr << "composer: SpeedMonitor has no peak flops for '" << props->name << "' at "
              << to_string(state.precision) << ", so no MFU; set SpeedMonitorOptions::gpu_flops_available\n";
#endif
}

void SpeedMonitor::batch_end(State& state, Logger& logger) {
  const Timestamp& ts = state.timestamp;
  double flops = flops_.empty() ? 0.0 : flops_.back();
  if (auto f = state.model->flops_per_batch(state.batch)) flops += *f;
  samples_.push_back(static_cast<double>(ts.sample));
  tokens_.push_back(static_cast<double>(ts.token));
  wct_.push_back(ts.total_wct.count());
  flops_.push_back(flops);
  if (static_cast<int64_t>(wct_.size()) > window_size_ + 1) {
    samples_.pop_front();
    tokens_.pop_front();
    wct_.pop_front();
    flops_.pop_front();
  }
  std::map<std::string, double> m;
  if (static_cast<int64_t>(wct_.size()) == window_size_ + 1) {
    const double world = static_cast<double>(dist::get_world_size());
    const double elapsed = wct_.back() - wct_.front();
    if (elapsed > 0) {
      const double bps = static_cast<double>(window_size_) / elapsed;
      const double sps = (samples_.back() - samples_.front()) / elapsed;
      m["throughput/batches_per_sec"] = bps;
      m["throughput/samples_per_sec"] = sps;
      m["throughput/device/batches_per_sec"] = bps / world;
      m["throughput/device/samples_per_sec"] = sps / world;
      const double tps = (tokens_.back() - tokens_.front()) / elapsed;
      if (tps > 0) {
        m["throughput/tokens_per_sec"] = tps;
        m["throughput/device/tokens_per_sec"] = tps / world;
      }
      const double fps = (flops_.back() - flops_.front()) / elapsed;
      if (fps > 0) {
        m["throughput/flops_per_sec"] = fps;
        m["throughput/device/flops_per_sec"] = fps / world;
        if (gpu_flops_available_) m["throughput/device/mfu"] = fps / world / *gpu_flops_available_;
      }
    }
  }
  const double train = ts.total_wct.count();
  m["time/train"] = train / divider_;
  m["time/val"] = total_eval_wct_ / divider_;
  m["time/total"] = (train + total_eval_wct_) / divider_;
  logger.log_metrics(m);
}

void SpeedMonitor::eval_end(State& state, Logger&) { total_eval_wct_ += state.eval_timestamp.total_wct.count(); }

c10::IValue SpeedMonitor::state_dict() const {
  Dict d = new_dict();
  d.insert("total_eval_wct", total_eval_wct_);
  return d;
}

void SpeedMonitor::load_state_dict(const c10::IValue& state) {
  total_eval_wct_ = dict_get(state.toGenericDict(), "total_eval_wct", "SpeedMonitor state").toDouble();
}

}  // namespace composer
