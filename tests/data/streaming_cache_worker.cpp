// One rank of StreamingDatasetTest.RanksOfANodeShareOneCache: reads its part of every epoch from a remote through a
// cache folder that the other ranks (other processes) use at the same time, with a cache limit.
// Usage: streaming_cache_worker REMOTE LOCAL RANK WORLD CACHE_LIMIT EPOCHS
// Prints "sample EPOCH INDEX SUM" for every sample (SUM: the sum of its tokens) and "done" at the end.
#include "composer/data/streaming_dataset.h"

#include <ATen/ATen.h>

#include <cstdlib>
#include <iostream>

using namespace composer;

int main(int argc, char** argv) {
  if (argc != 7) {
    std::cerr << "usage: streaming_cache_worker REMOTE LOCAL RANK WORLD CACHE_LIMIT EPOCHS\n";
    return 2;
  }
  const int64_t rank = std::atoll(argv[3]), world = std::atoll(argv[4]), epochs = std::atoll(argv[6]);
  try {
    StreamingDataset ds(StreamingDatasetOptions()
                            .remote(argv[1])
                            .local(argv[2])
                            .shuffle(true)
                            .shuffle_block_size(64)
                            .predownload(2)
                            .validate_hash("sha1")
                            .cache_limit(std::atoll(argv[5]))
                            .columns({"tokens"}));
    for (int64_t epoch = 0; epoch < epochs; ++epoch) {
      const at::Tensor order = ds.sample_order(epoch, 0, rank, world);
      for (int64_t b = 0; b < order.size(0); b += 8) {
        const at::Tensor idx = order.slice(0, b, std::min<int64_t>(b + 8, order.size(0)));
        const at::Tensor sums = ds.get_batch(idx).at("tokens").sum(1);
        for (int64_t k = 0; k < idx.size(0); ++k)
          std::cout << "sample " << epoch << " " << idx[k].item<int64_t>() << " " << sums[k].item<int64_t>() << "\n";
      }
    }
  } catch (const std::exception& e) {
    std::cout << "error: " << e.what() << std::endl;
    return 1;
  }
  std::cout << "done" << std::endl;
  return 0;
}
