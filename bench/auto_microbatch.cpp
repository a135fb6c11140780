// bench/auto_microbatch: what automatic microbatching costs, in one run.
//   composer-cpp launch -n N -- build/bench/auto_microbatch [--rounds R] [--batches B] [--limit-mib M]
// 1. Steady state: an MLP 784-2048-2048-10 (23 MB of gradients), 256 samples per rank, whole batch fits. Two
//    Trainers, device_train_microbatch_size unset and "auto", take turns for R rounds of B batches each; prints the
//    median step time of each (the search's check per microbatch, and, over ranks, gradient averaging after the
//    microbatches instead of overlapped with the last backward pass).
// 2. The search itself (last, since it limits the process): an MLP 64-1024-10 with dropout, 4096 samples per rank;
//    rank 0 caps its address space (RLIMIT_AS) at what it maps plus M MiB at the first batch. Prints the size found,
//    the first step (with its failed attempts) and the median of the following steps.
#include "support/memory_limit.h"

#include "composer/composer.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <thread>

#include <malloc.h>

using namespace composer;
using Clock = std::chrono::steady_clock;

namespace {

double seconds(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// Per-step wall times (BATCH_START to BATCH_END), and the last logged microbatch size.
class StepTimes : public LoggerDestination {
 public:
  void batch_start(State&, Logger&) override { start_ = Clock::now(); }
  void batch_end(State&, Logger&) override { times.push_back(seconds(start_)); }
  void log_metrics(const std::map<std::string, double>& m, int64_t) override {
    if (auto it = m.find("trainer/device_train_microbatch_size"); it != m.end()) size = it->second;
  }
  std::vector<double> times;
  double size = 0;

 private:
  Clock::time_point start_;
};

class LimitMemory : public Callback {
 public:
  explicit LimitMemory(int64_t budget) : budget_(budget) {}
  void before_train_batch(State&, Logger&) override {
    if (applied_) return;
    applied_ = true;
    testing::limit_address_space(budget_);
  }

 private:
  int64_t budget_;
  bool applied_ = false;
};

std::shared_ptr<ComposerClassifier> mlp(std::vector<int64_t> widths, bool dropout) {
  torch::manual_seed(0);
  std::vector<std::shared_ptr<nn::Layer>> layers{std::make_shared<nn::Flatten>()};
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    layers.push_back(std::make_shared<nn::Linear>(widths[i], widths[i + 1]));
    if (i + 2 < widths.size()) {
      layers.push_back(std::make_shared<nn::ReLU>());
      if (dropout) layers.push_back(std::make_shared<nn::Dropout>(0.1));
    }
  }
  return ComposerClassifier::wrap(std::make_shared<nn::Sequential>(layers));
}

struct Run {
  std::shared_ptr<StepTimes> times = std::make_shared<StepTimes>();
  std::unique_ptr<Trainer> trainer;
};

Run make_run(int64_t in, std::vector<int64_t> widths, bool dropout, int64_t per_rank, MicrobatchSize size,
             std::vector<std::shared_ptr<Callback>> callbacks = {}) {
  const int64_t world = dist::get_world_size(), rank = dist::get_global_rank();
  auto gen = at::detail::createCPUGenerator(1);
  const int64_t n = per_rank * world * 8;
  const Batch data(at::randn({n, in}, gen), at::randint(10, {n}, gen, at::TensorOptions().dtype(at::kLong)));
  auto model = mlp(widths, dropout);
  Run r;
  r.trainer = std::make_unique<Trainer>(
      TrainerOptions(model)
          .train_dataloader(std::make_shared<TensorDataLoader>(
              data, TensorDataLoaderOptions(per_rank).shuffle(true).num_replicas(world).rank(rank)))
          .optimizer(std::make_shared<optim::DecoupledSGDW>(model->parameters(),
                                                            optim::DecoupledSGDWOptions(0.01).momentum(0.9)))
          .max_duration(Time::from_batch(2))
          .device_train_microbatch_size(size)
          .tune_allocator(false)
          .progress_bar(false)
          .device("cpu")
          .callbacks(callbacks)
          .loggers({r.times}));
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t rounds = 5, batches = 10, limit_mib = 40;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--rounds")) rounds = std::atoll(argv[i + 1]);
    if (!std::strcmp(argv[i], "--batches")) batches = std::atoll(argv[i + 1]);
    if (!std::strcmp(argv[i], "--limit-mib")) limit_mib = std::atoll(argv[i + 1]);
  }
  ::mallopt(M_MMAP_THRESHOLD, 128 * 1024);  // freed tensors leave the address space (see the test worker)
  const int64_t world = dist::get_world_size(), rank = dist::get_global_rank();
  configure_threads(
      static_cast<int>(std::max<int64_t>(1, static_cast<int64_t>(std::thread::hardware_concurrency()) / world)));

  // 1. Steady state, interleaved.
  Run fixed = make_run(784, {784, 2048, 2048, 10}, false, 256, MicrobatchSize());
  Run automatic = make_run(784, {784, 2048, 2048, 10}, false, 256, MicrobatchSize::automatic());
  fixed.trainer->fit();  // warm-up (2 batches each)
  automatic.trainer->fit();
  fixed.times->times.clear();
  automatic.times->times.clear();
  for (int64_t r = 0; r < rounds; ++r) {
    fixed.trainer->fit(Time::from_batch(batches));
    automatic.trainer->fit(Time::from_batch(batches));
  }
  const double fixed_ms = 1e3 * median(fixed.times->times), auto_ms = 1e3 * median(automatic.times->times);
  const double steady_size = automatic.times->size;
  fixed.trainer->close();
  automatic.trainer->close();

  // 2. The search under a real limit on rank 0.
  std::vector<std::shared_ptr<Callback>> limit;
  if (rank == 0) limit.push_back(std::make_shared<LimitMemory>(limit_mib << 20));
  Run search = make_run(64, {64, 1024, 10}, true, 4096, MicrobatchSize::automatic(), limit);
  search.trainer->fit();  // 2 batches: the first one searches
  search.trainer->fit(Time::from_batch(batches));
  const auto& t = search.times->times;
  const double first_ms = 1e3 * t.front();
  const double after_ms = 1e3 * median(std::vector<double>(t.begin() + 1, t.end()));
  if (rank == 0) {
    std::printf("auto_microbatch: world %lld, %d threads per rank\n", static_cast<long long>(world),
                at::get_num_threads());
    std::printf(
        "steady state (MLP 784-2048-2048-10, 256 per rank, whole batch fits, size %g): unset %.2f ms, auto "
        "%.2f ms a step (auto/unset %.3f)\n",
        steady_size, fixed_ms, auto_ms, auto_ms / fixed_ms);
    std::printf(
        "search (MLP 64-1024-10, 4096 per rank, rank 0 limited to %lld MiB more): found %g, first step "
        "%.1f ms, then %.1f ms a step (first/then %.2f)\n",
        static_cast<long long>(limit_mib), search.times->size, first_ms, after_ms, first_ms / after_ms);
    std::printf(
        "RESULT auto_microbatch world=%lld unset_ms=%.2f auto_ms=%.2f ratio=%.3f found=%g first_ms=%.1f "
        "then_ms=%.1f\n",
        static_cast<long long>(world), fixed_ms, auto_ms, auto_ms / fixed_ms, search.times->size, first_ms, after_ms);
  }
  search.trainer->close();
  return 0;
}
