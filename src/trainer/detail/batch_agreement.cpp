#include "trainer/detail/batch_agreement.h"

#include "composer/dist/env.h"

#include <iostream>
#include <mutex>
#include <set>

namespace composer::detail {

bool every_rank_has_batch(dist::Strategy& strategy, bool has_batch, const std::string& loader, int64_t index) {
  const int64_t world = strategy.num_replicas();
  if (world == 1) return has_batch;
  const int64_t with = strategy.count_ranks_with(has_batch);
  if (with == world) return true;
  static std::mutex mutex;
  static std::set<std::string> warned;
  std::lock_guard<std::mutex> lock(mutex);
  if (with > 0 && dist::get_global_rank() == 0 && warned.insert(loader).second) {
    std::cerr << "composer: warning: the " << loader << " data gives the ranks different numbers of batches: " << with
              << " of " << world << " ranks have batch " << index + 1
              << " of this pass, the others none; the pass ends here on every rank and the longer ranks' remaining "
                 "batches are not used (a loader whose ranks get equal sample counts, as DistributedSampler's "
                 "padding gives, uses all of them)\n";
  }
  return false;
}

}  // namespace composer::detail
