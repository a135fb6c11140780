#pragma once

#include "composer/metrics/metric.h"

namespace composer::detail {

/// The metric's value over every rank's data: its summed state is all-reduced into a fresh copy (the metric itself
/// keeps this rank's state, so it can keep accumulating). World size 1: metric.compute().
double compute_global(const Metric& metric);

}  // namespace composer::detail
