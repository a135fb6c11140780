#include "cli/build_data.h"

#include "cli/build_from.h"

namespace composer::cli {

DataSpec build_data(const ConfigNode& n, bool train, uint64_t seed, std::pair<int64_t, int64_t> place) {
  datasets::DataRequest request;
  request.train = train;
  request.seed = seed;
  request.num_replicas = place.first;
  request.rank = place.second;
  return *build_from(datasets::dataset_registry(), n, n.require_string("dataset"), "dataset", request);
}

}  // namespace composer::cli
