#include "composer/callbacks/threshold_stopper.h"

#include "composer/core/state.h"
#include "composer/metrics/metric.h"
#include "utils/detail/text.h"

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
    const std::string lower = detail::to_lower(monitor_);
    const bool minimize = lower.find("loss") != std::string::npos || lower.find("error") != std::string::npos ||
                          lower.find("perplexity") != std::string::npos;
    comp_ = minimize ? Compare([](double v, double t) { return v <= t; })
                     : Compare([](double v, double t) { return v >= t; });
  }
}

void ThresholdStopper::check(State& state, const std::map<std::string, double>& values) {
  auto it = values.find(monitor_);
  if (it == values.end()) {  // Composer raises too: a misspelt monitor would otherwise never stop the run
    std::string known;
    for (const auto& [name, v] : values) known += (known.empty() ? "" : ", ") + name;
    throw std::invalid_argument("ThresholdStopper: no metric '" + monitor_ + "' for dataloader label '" + label_ +
                                "'; the metrics there are: " + (known.empty() ? "none" : known));
  }
  if (!state.max_duration) return;
  if (comp_(it->second, threshold_)) state.stop_training();
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
