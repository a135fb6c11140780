#include "trainer/detail/global_metric.h"

namespace composer::detail {

double compute_global(const Metric& metric, dist::Strategy& strategy) {
  if (strategy.num_replicas() == 1) return metric.compute();  // this rank's state is the global one: no copy
  at::Tensor summed = metric.state().clone();
  strategy.sum_metric_state(summed);
  auto copy = metric.clone_empty();
  copy->set_state(summed);
  if (metric.row_width() > 0) copy->set_rows(strategy.gather_metric_rows(metric.rows()));
  return copy->compute();
}

}  // namespace composer::detail
