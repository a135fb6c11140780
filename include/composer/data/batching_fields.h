// The keys that TensorDataLoaderOptions and DatasetLoaderOptions share, in one list: each options struct's
// for_each_field visits them through its accessors, then adds its own.
#pragma once

namespace composer {

template <class Options, class Visit>
void visit_batching_fields(Options& self, Visit&& visit) {
  visit("batch_size", self.batch_size(), "samples per batch (per rank)");
  visit("shuffle", self.shuffle(), "reshuffle every epoch");
  visit("seed", self.seed(), "the shuffling seed");
  visit("drop_last", self.drop_last(), "drop the last incomplete batch");
  visit("num_replicas", self.num_replicas(), "ranks sharing the data");
  visit("rank", self.rank(), "this rank");
}

}  // namespace composer
