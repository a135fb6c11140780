#include "composer/callbacks/early_stopper.h"

#include "callbacks/detail/monitored_metric.h"
#include "composer/core/state.h"
#include "composer/metrics/metric.h"

#include <cmath>
#include <stdexcept>

namespace composer {
namespace {

EarlyStopperOptions::Compare comparison(const std::string& comp, const std::string& monitor) {
  const std::string c = detail::to_lower(comp);
  if (c == "greater" || c == "gt") return [](double v, double best) { return v > best; };
  if (c == "less" || c == "lt") return [](double v, double best) { return v < best; };
  if (!c.empty()) {
    throw std::invalid_argument("EarlyStopper.comp '" + comp + "' must be one of 'greater', 'gt', 'less', 'lt'");
  }
  return comparison(detail::minimises(monitor) ? "less" : "greater", monitor);
}

}  // namespace

EarlyStopper::EarlyStopper(EarlyStopperOptions options)
    : monitor_(canonical_metric_name(
          required_value(options.monitor(), "EarlyStopper", "monitor", "a metric name such as 'Accuracy'"))),
      label_(required_value(options.dataloader_label(), "EarlyStopper", "dataloader_label",
                            "an evaluator label or 'train'")),
      comp_(options.comp_fn() ? options.comp_fn() : comparison(options.comp(), monitor_)),
      min_delta_(std::abs(options.min_delta())),
      patience_(options.patience()) {
  if (monitor_.empty()) throw std::invalid_argument("EarlyStopper.monitor must name a metric");
  if (patience_.unit() != TimeUnit::EPOCH && patience_.unit() != TimeUnit::BATCH) {
    throw std::invalid_argument("EarlyStopper.patience must be in epochs or batches (such as '2ep' or '100ba'), got '" +
                                patience_.to_string() + "'");
  }
}

void EarlyStopper::update(State& state, const std::map<std::string, double>& values) {
  const double value = detail::require_metric("EarlyStopper", monitor_, label_, values);
  if (!best_ || (comp_(value, *best_) && std::abs(value - *best_) > min_delta_)) {
    best_ = value;
    best_occurred_ = state.timestamp;
  }
  const bool by_epoch = patience_.unit() == TimeUnit::EPOCH;
  const int64_t since =
      by_epoch ? state.timestamp.epoch - best_occurred_.epoch : state.timestamp.batch - best_occurred_.batch;
  if (since > patience_.int_value() && state.max_duration) state.stop_training();
}

void EarlyStopper::eval_end(State& state, Logger&) {
  if (state.dataloader_label == label_) update(state, state.eval_metric_values);
}

void EarlyStopper::epoch_end(State& state, Logger&) {
  if (label_ == "train") update(state, state.train_metric_values);
}

void EarlyStopper::batch_end(State& state, Logger&) {
  if (patience_.unit() == TimeUnit::BATCH && label_ == "train") update(state, state.train_metric_values);
}

}  // namespace composer
