#include "trainer/detail/global_metric.h"

#include "composer/dist/dist.h"

namespace composer::detail {

double compute_global(const Metric& metric) {
  if (dist::get_world_size() == 1) return metric.compute();
  at::Tensor summed = metric.state().clone();
  dist::all_reduce(summed);
  auto copy = metric.clone_empty();
  copy->set_state(summed);
  return copy->compute();
}

}  // namespace composer::detail
