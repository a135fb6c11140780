// bench/streaming REMOTE LOCAL BATCH WORKERS: one epoch of MDS shards through StreamingDataset and its loader
// (REMOTE "" reads LOCAL only); prints samples per second. The reference is bench/python/streaming_read.py.
#include "composer/composer.h"

#include <chrono>
#include <iostream>

using namespace composer;

int main(int argc, char** argv) {
  if (argc != 5) {
    std::cerr << "usage: streaming REMOTE LOCAL BATCH WORKERS\n";
    return 2;
  }
  const std::string remote = argv[1];
  const auto t0 = std::chrono::steady_clock::now();
  auto ds = std::make_shared<StreamingDataset>(StreamingDatasetOptions().remote(remote).local(argv[2]));
  auto loader =
      make_streaming_loader(ds, DatasetLoaderOptions(std::atoll(argv[3])).num_workers(std::atoll(argv[4])), 0, 1);
  loader->set_epoch(0);
  loader->reset();
  int64_t n = 0;
  while (auto b = loader->next()) n += b->num_samples();
  const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "RESULT impl=cpp where=" << (remote.empty() ? "local" : "s3") << " samples=" << n << " seconds=" << dt
            << " samples_per_s=" << static_cast<int64_t>(n / dt) << std::endl;
  return 0;
}
