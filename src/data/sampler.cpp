#include "composer/data/sampler.h"

#include <ATen/ATen.h>

#include <stdexcept>

namespace composer {

void SamplerOptions::validate() const {
  if (num_replicas_ <= 0) throw std::invalid_argument("num_replicas must be > 0, got " + std::to_string(num_replicas_));
  if (rank_ < 0 || rank_ >= num_replicas_) {
    throw std::invalid_argument("rank must be in [0, " + std::to_string(num_replicas_) + "), got " +
                                std::to_string(rank_));
  }
}

at::Tensor sample_indices(int64_t dataset_size, int64_t epoch, const SamplerOptions& o) {
  o.validate();
  const auto opts = at::TensorOptions().dtype(at::kLong);
  at::Tensor order;
  if (o.shuffle()) {
    auto gen = at::detail::createCPUGenerator(o.seed() + static_cast<uint64_t>(epoch));
    order = at::randperm(dataset_size, gen, opts);
  } else {
    order = at::arange(dataset_size, opts);
  }
  const int64_t r = o.num_replicas();
  if (r == 1) return order;
  int64_t total;
  if (o.drop_last()) {
    total = (dataset_size / r) * r;
    order = order.narrow(0, 0, total);
  } else {
    total = ((dataset_size + r - 1) / r) * r;
    while (order.size(0) < total)
      order = at::cat({order, order.narrow(0, 0, std::min(order.size(0), total - order.size(0)))});
  }
  return order.slice(0, o.rank(), total, r).contiguous();
}

}  // namespace composer
