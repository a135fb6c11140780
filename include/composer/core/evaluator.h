// Evaluator: a labelled evaluation data set with its metrics and interval.
#pragma once

#include "composer/core/time.h"
#include "composer/data/data_loader.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace composer {

struct Evaluator {
  /// Key part of `metrics/<label>/<Metric>`.
  std::string label = "eval";
  std::shared_ptr<DataLoader> dataloader;
  /// Regexes over the model's eval metric names; empty = all of them. "MulticlassAccuracy" (Composer's name) means
  /// "Accuracy" (canonical_metric_name).
  std::vector<std::string> metric_names;
  /// Batches per evaluation; -1 = the whole loader.
  int64_t subset_num_batches = -1;
  /// When to evaluate during fit; unset = the Trainer's eval_interval.
  std::optional<Time> eval_interval;
  /// Samples per eval microbatch; unset = the loader's batch size.
  std::optional<int64_t> device_eval_microbatch_size;
  /// Composer's device_eval_microbatch_size="auto": start at device_eval_microbatch_size (unset: the whole batch)
  /// and halve it whenever memory runs out, redoing the batch (EvalLoop::run); the size found is kept here.
  bool auto_microbatching = false;
};

}  // namespace composer
