#include "composer/callbacks/speed_monitor.h"

#include "callbacks/detail/time_divider.h"
#include "composer/core/logger.h"
#include "composer/core/serialization.h"
#include "composer/core/state.h"
#include "composer/dist/env.h"
#include "composer/models/composer_model.h"

#include <stdexcept>

namespace composer {

SpeedMonitor::SpeedMonitor(SpeedMonitorOptions options)
    : window_size_(options.window_size()),
      divider_(callbacks::detail::seconds_per(options.time_unit(), "SpeedMonitor")) {
  if (window_size_ <= 0)
    throw std::invalid_argument("SpeedMonitor.window_size must be > 0, got " + std::to_string(window_size_));
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
