// bench/ddp_scaling: data-parallel throughput and the gradient all-reduce against raw c10d, in one run.
//   composer-cpp launch -n 2 -- build/bench/ddp_scaling [--batches N]     (and with -n 1 for the baseline)
// Prints (rank 0): training samples/s through the Trainer (MLP 784-2048-2048-10, 64 samples per rank per batch),
// then for the same model's ~20 MB of gradients: backward with and without the bucketed reducer, and one raw c10d
// all-reduce of the same bytes; and the cost of the ranks' agreement before each batch (an 8-byte all-reduce).
#include "composer/composer.h"

#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

using namespace composer;
using Clock = std::chrono::steady_clock;

namespace {

torch::nn::Sequential make_model() {
  torch::manual_seed(0);
  return torch::nn::Sequential(torch::nn::Linear(784, 2048), torch::nn::ReLU(), torch::nn::Linear(2048, 2048),
                               torch::nn::ReLU(), torch::nn::Linear(2048, 10));
}

double seconds(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

int main(int argc, char** argv) {
  int64_t batches = 60;
  for (int i = 1; i + 1 < argc; i += 2)
    if (!std::strcmp(argv[i], "--batches")) batches = std::atoll(argv[i + 1]);
  const int64_t world = dist::get_world_size(), rank = dist::get_global_rank();
  configure_threads(
      static_cast<int>(std::max<int64_t>(1, static_cast<int64_t>(std::thread::hardware_concurrency()) / world)));
  auto gen = at::detail::createCPUGenerator(1);
  const Batch data(at::randn({64 * 2 * 40, 784}, gen),
                   at::randint(10, {64 * 2 * 40}, gen, at::TensorOptions().dtype(at::kLong)));
  auto model = ComposerClassifier::wrap(make_model());
  auto loader = std::make_shared<TensorDataLoader>(
      data, TensorDataLoaderOptions(64).shuffle(true).num_replicas(world).rank(rank));
  Trainer trainer(
      TrainerOptions(model)
          .train_dataloader(loader)
          .optimizer(std::make_shared<torch::optim::SGD>(model->parameters(), torch::optim::SGDOptions(0.01)))
          .max_duration(Time::from_batch(5))
          .progress_bar(false)
          .device("cpu"));
  trainer.fit();  // warm-up
  auto t = Clock::now();
  trainer.fit(Time::from_batch(batches));
  const double train_s = seconds(t);
  const double samples_per_s = static_cast<double>(64 * world * batches) / train_s;

  // The gradient exchange alone, on the same model's gradients.
  const Batch b(data.input().narrow(0, 0, 64), data.target().narrow(0, 0, 64));
  std::unique_ptr<dist::GradientReducer> reducer;
  if (world > 1) reducer = std::make_unique<dist::GradientReducer>(model->parameters());
  double bytes = 0;
  for (const auto& p : model->parameters()) bytes += static_cast<double>(p.numel() * 4);
  auto time_backward = [&](bool sync) {
    double best = 1e30;
    for (int i = 0; i < 5; ++i) {
      for (auto& p : model->parameters()) p.mutable_grad().reset();
      const at::Tensor loss = model->loss(model->forward(b), b);
      dist::barrier();
      auto s = Clock::now();
      if (reducer) reducer->prepare(sync);
      loss.backward();
      if (reducer && sync) reducer->finalize();
      best = std::min(best, seconds(s));
    }
    return best;
  };
  const double with_sync = time_backward(true), without = time_backward(false);
  at::Tensor flat = at::randn({static_cast<int64_t>(bytes / 4)});
  double raw = 1e30;
  for (int i = 0; i < 5; ++i) {
    dist::barrier();
    auto s = Clock::now();
    dist::all_reduce(flat);
    raw = std::min(raw, seconds(s));
  }
  // The ranks' agreement before each batch (Strategy::count_ranks_with: one 8-byte all-reduce), averaged over calls.
  double agree = 0;
  {
    dist::barrier();
    const int calls = 200;
    auto s = Clock::now();
    for (int i = 0; i < calls; ++i) (void)trainer.state().strategy->count_ranks_with(true);
    agree = seconds(s) / calls;
  }
  const double step_s = train_s / static_cast<double>(batches);
  if (rank == 0) {
    std::printf("batch agreement: %.1f us per batch, %.2f%% of a %.1f ms step\n", 1e6 * agree, 100 * agree / step_s,
                1e3 * step_s);
    std::printf("ddp_scaling: world %lld, %d threads per rank, %.1f MB of gradients\n", static_cast<long long>(world),
                at::get_num_threads(), bytes / 1e6);
    std::printf("train: %.0f samples/s (%lld batches of %d per rank)\n", samples_per_s, static_cast<long long>(batches),
                64);
    std::printf("backward: %.1f ms without sync, %.1f ms with the bucketed reducer (exposed exchange %.1f ms)\n",
                1e3 * without, 1e3 * with_sync, 1e3 * (with_sync - without));
    std::printf("raw c10d all-reduce of the same bytes: %.1f ms (%.2f GB/s algbw)\n", 1e3 * raw, bytes / raw / 1e9);
    std::printf(
        "RESULT ddp_scaling world=%lld samples_per_s=%.0f exposed_exchange_ms=%.1f raw_allreduce_ms=%.1f "
        "ratio_raw_over_exposed=%.2f\n",
        static_cast<long long>(world), samples_per_s, 1e3 * (with_sync - without), 1e3 * raw,
        world > 1 ? raw / std::max(1e-9, with_sync - without) : 0.0);
  }
  trainer.close();
  return 0;
}
