// A training process for the automatic-microbatching tests, under a real memory limit. At the first
// BEFORE_TRAIN_BATCH (the first batch loaded) the limited rank caps its address space (setrlimit RLIMIT_AS) at what
// it maps then plus BUDGET_MIB, so the activations of a whole batch no longer fit and LibTorch's CPU allocator
// fails the way it does on a full machine.
// Usage: auto_microbatch_worker OUT TRAIN_MICROBATCH EVAL_MICROBATCH BUDGET_MIB LIMITED_RANK [cuda]
//   TRAIN_MICROBATCH, EVAL_MICROBATCH: "auto" or a number of samples (0: the whole batch)
//   LIMITED_RANK: the rank that gets the limit, "all", or -1 for none
//   cuda: train on the GPU instead, limited through the caching allocator's memory fraction (what it holds at
//         the first batch plus BUDGET_MIB), so CUDA's own out-of-memory error is the one the search sees
// Prints "train_microbatch N" per batch and "eval_microbatch N" per eval batch (the values the Trainer logs),
// "accuracy A" after the final evaluation, and rank 0 writes the final weights to OUT. Under composer-cpp launch
// each rank trains on its shard.
#include "support/memory_limit.h"

#include "composer/composer.h"

#include <torch/serialize.h>

#include <cstdlib>
#include <fstream>
#include <iostream>

#if __has_include(<c10/cuda/CUDACachingAllocator.h>)
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#define WORKER_HAS_CUDA 1
#endif

#include <malloc.h>

using namespace composer;

namespace {

class LimitMemory : public Callback {
 public:
  LimitMemory(int64_t budget_bytes, bool cuda) : budget_(budget_bytes), cuda_(cuda) {}
  void before_train_batch(State&, Logger&) override {
    if (applied_) return;  // a redone batch fires BEFORE_TRAIN_BATCH again
    applied_ = true;
    if (cuda_) {
      limit_cuda();
    } else {
      testing::limit_address_space(budget_);
    }
    std::cout << "limited to " << (budget_ >> 20) << " MiB more" << std::endl;
  }

 private:
  void limit_cuda() const {
#ifdef WORKER_HAS_CUDA
    const auto device = c10::cuda::current_device();
    size_t free_bytes = 0, total_bytes = 0;
    c10::cuda::CUDACachingAllocator::emptyCache();
    C10_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device);
    const double held = static_cast<double>(stats.reserved_bytes[0].current);
    c10::cuda::CUDACachingAllocator::setMemoryFraction((held + static_cast<double>(budget_)) / total_bytes, device);
#else
    throw std::runtime_error("this LibTorch has no CUDA caching allocator");
#endif
  }

  int64_t budget_;
  bool cuda_;
  bool applied_ = false;
};

// With $AUTO_MICROBATCH_LEAK_MIB set: keeps that much more memory after every batch, as a callback that stores
// each step's tensors would, so that the room for activations shrinks from batch to batch.
class KeepMemory : public Callback {
 public:
  explicit KeepMemory(int64_t bytes) : bytes_(bytes) {}
  void batch_end(State&, Logger&) override { kept_.push_back(at::ones({bytes_ / 4})); }

 private:
  int64_t bytes_;
  std::vector<at::Tensor> kept_;
};

class PrintSizes : public LoggerDestination {
 public:
  void log_metrics(const std::map<std::string, double>& metrics, int64_t) override {
    for (const auto& [key, value] : metrics) {
      if (key == "trainer/device_train_microbatch_size") std::cout << "train_microbatch " << value << std::endl;
      if (key == "trainer/eval/device_eval_microbatch_size") std::cout << "eval_microbatch " << value << std::endl;
      if (key == "metrics/eval/Accuracy") std::cout << "accuracy " << value << std::endl;
    }
  }
};

MicrobatchSize microbatch_arg(const std::string& text) {
  return text == "auto" ? MicrobatchSize::automatic() : MicrobatchSize(std::stoll(text));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6 && argc != 7) {
    std::cerr << "usage: auto_microbatch_worker OUT TRAIN_MICROBATCH EVAL_MICROBATCH BUDGET_MIB LIMITED_RANK [cuda]\n";
    return 2;
  }
  // Every tensor above 128 KiB gets its own mapping, returned when freed (glibc otherwise raises the threshold as
  // large blocks are freed, and the heap's high-water mark, not the live tensors, would meet the limit).
  ::mallopt(M_MMAP_THRESHOLD, 128 * 1024);
  const std::string out = argv[1], eval_arg = argv[3], limited = argv[5];
  const int64_t budget = std::stoll(argv[4]) << 20;
  const bool cuda = argc == 7 && std::string(argv[6]) == "cuda";
  const int64_t rank = dist::get_global_rank(), world = dist::get_world_size();
  torch::manual_seed(0);
  // Small weights, wide activations: memory grows with the microbatch, not with the model.
  auto net = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Layer>>{
      std::make_shared<nn::Flatten>(), std::make_shared<nn::Linear>(64, 1024), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Dropout>(0.1), std::make_shared<nn::Linear>(1024, 10)});
  auto model = ComposerClassifier::wrap(net);
  auto opt =
      std::make_shared<optim::DecoupledSGDW>(model->parameters(), optim::DecoupledSGDWOptions(0.05).momentum(0.9));
  auto train = std::make_shared<DatasetLoader>(
      synthetic_images(16384, 1, 8, 10, 3),
      DatasetLoaderOptions(4096).shuffle(true).seed(5).num_workers(0).num_replicas(world).rank(rank));
  Evaluator eval;
  eval.dataloader = std::make_shared<DatasetLoader>(
      synthetic_images(8192, 1, 8, 10, 4),
      DatasetLoaderOptions(4096).num_workers(0).num_replicas(world).rank(rank).drop_last(false));
  if (eval_arg == "auto") {
    eval.auto_microbatching = true;
  } else if (std::stoll(eval_arg) > 0) {
    eval.device_eval_microbatch_size = std::stoll(eval_arg);
  }
  std::vector<std::shared_ptr<Callback>> callbacks;
  if (limited == "all" || (limited != "-1" && std::stoll(limited) == rank))
    callbacks.push_back(std::make_shared<LimitMemory>(budget, cuda));
  if (const char* leak = std::getenv("AUTO_MICROBATCH_LEAK_MIB"))
    callbacks.push_back(std::make_shared<KeepMemory>(std::stoll(leak) << 20));
  Trainer trainer(TrainerOptions(model)
                      .seed(11)
                      .device(cuda ? "cuda" : "cpu")
                      .precision(Precision::FP32)
                      .num_threads(1)
                      .tune_allocator(false)
                      .train_dataloader(train)
                      .evaluators({eval})
                      .eval_interval("4ba")
                      .optimizer(opt)
                      .max_duration("4ba")
                      .device_train_microbatch_size(microbatch_arg(argv[2]))
                      .progress_bar(false)
                      .dist_timeout(60)
                      .callbacks(callbacks)
                      .loggers({std::make_shared<PrintSizes>()}));
  trainer.fit();
  if (rank == 0) {
    Dict w(c10::StringType::get(), c10::TensorType::get());
    for (const auto& p : model->named_parameters()) w.insert(p.key(), p.value().cpu());
    write_file_atomically(out, torch::pickle_save(w));
  }
  trainer.close();
  return 0;
}
