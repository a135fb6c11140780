#include "composer/callbacks/early_stopper.h"

#include "composer/core/state.h"
#include "composer/metrics/metric.h"
#include "utils/detail/text.h"

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
  const std::string m = detail::to_lower(monitor);
  const bool minimize = m.find("loss") != std::string::npos || m.find("error") != std::string::npos ||
                        m.find("perplexity") != std::string::npos;
  return comparison(minimize ? "less" : "greater", monitor);
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
  auto it = values.find(monitor_);
  if (it == values.end()) {  // as Composer: a misspelt monitor would otherwise never stop the run
    std::string known;
    for (const auto& [name, v] : values) known += (known.empty() ? "" : ", ") + name;
    throw std::invalid_argument("EarlyStopper: no metric '" + monitor_ + "' for dataloader label '" + label_ +
                                "'; the metrics there are: " + (known.empty() ? "none" : known));
  }
  const double value = it->second;
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
