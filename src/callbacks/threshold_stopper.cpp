#include "composer/callbacks/threshold_stopper.h"

#include "callbacks/detail/monitored_metric.h"
#include "composer/core/state.h"
#include "composer/metrics/metric.h"

namespace composer {

ThresholdStopper::ThresholdStopper(std::string monitor, std::string dataloader_label, double threshold, Compare comp)
    : ThresholdStopper(ThresholdStopperOptions()
                           .monitor(std::move(monitor))
                           .dataloader_label(std::move(dataloader_label))
                           .threshold(threshold)
                           .comp(std::move(comp))) {}

ThresholdStopper::ThresholdStopper(ThresholdStopperOptions options)
    : monitor_(canonical_metric_name(
          required_value(options.monitor(), "ThresholdStopper", "monitor", "a metric name such as 'Accuracy'"))),
      label_(required_value(options.dataloader_label(), "ThresholdStopper", "dataloader_label",
                            "an evaluator label or 'train'")),
      threshold_(required_value(options.threshold(), "ThresholdStopper", "threshold", "a number")),
      comp_(options.comp()),
      stop_on_batch_(options.stop_on_batch()) {
  if (monitor_.empty()) throw std::invalid_argument("ThresholdStopper.monitor must name a metric");
  if (!comp_) {
    comp_ = detail::minimises(monitor_) ? Compare([](double v, double t) { return v <= t; })
                                        : Compare([](double v, double t) { return v >= t; });
  }
}

void ThresholdStopper::check(State& state, const std::map<std::string, double>& values) {
  const double value = detail::require_metric("ThresholdStopper", monitor_, label_, values);
  if (!state.max_duration) return;
  if (comp_(value, threshold_)) state.stop_training();
}

void ThresholdStopper::eval_end(State& state, Logger&) {
  if (state.dataloader_label == label_) check(state, state.eval_metric_values);
}

void ThresholdStopper::epoch_end(State& state, Logger&) {
  if (label_ == "train") check(state, state.train_metric_values);
}

void ThresholdStopper::batch_end(State& state, Logger&) {
  if (stop_on_batch_ && label_ == "train") check(state, state.train_metric_values);
}

}  // namespace composer
