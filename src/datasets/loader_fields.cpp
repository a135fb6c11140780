#include "datasets/detail/loader_fields.h"

#include "composer/dist/env.h"

namespace composer::datasets {

int64_t DataRequest::replicas() const {
  if (!train) return 1;
  return num_replicas > 0 ? num_replicas : dist::get_world_size();
}

int64_t DataRequest::replica_rank() const {
  if (!train) return 0;
  return rank >= 0 ? rank : dist::get_global_rank();
}

}  // namespace composer::datasets

namespace composer::datasets::detail {

std::string split_of(Hparams& h, const std::optional<std::string>& split, const DataRequest& request) {
  if (!split) return request.train ? "train" : "test";
  if (*split != "train" && *split != "test") h.fail("split", "'train' or 'test'");
  return *split;
}

int64_t positive(Hparams& h, const std::string& key, int64_t value, bool allow_zero) {
  if (value > 0 || (allow_zero && value == 0)) return value;
  h.fail(key, allow_zero ? "a non-negative integer" : "a positive integer");
}

DatasetLoaderOptions loader_options(Hparams& h, const LoaderFields& f, const DataRequest& request) {
  return DatasetLoaderOptions(positive(h, "batch_size", f.batch_size))
      .num_replicas(request.replicas())
      .rank(request.replica_rank())
      .shuffle(f.shuffle.value_or(request.train))
      .seed(f.seed.value_or(request.seed))
      .drop_last(f.drop_last)
      .num_workers(positive(h, "num_workers", f.num_workers, /*allow_zero=*/true));
}

}  // namespace composer::datasets::detail
