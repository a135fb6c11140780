#pragma once

#include "composer/dist/strategy.h"
#include "composer/metrics/metric.h"

namespace composer::detail {

/// The metric's value over every rank's data: its summed state (summed by the strategy) goes into a fresh copy, so
/// the metric itself keeps this rank's state and can keep accumulating.
double compute_global(const Metric& metric, dist::Strategy& strategy);

}  // namespace composer::detail
