// bench/trainer_overhead: the same model, data and optimizer through the Trainer and through a hand-written
// LibTorch loop, interleaved in one run. Last line: RESULT trainer_overhead ratio=<trainer time / hand time>.
//
// Usage: trainer_overhead [--rounds N] [--batches N] [--device cpu|cuda]
#include "composer/composer.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

torch::nn::Sequential make_mlp(uint64_t seed) {
  torch::manual_seed(seed);
  return torch::nn::Sequential(torch::nn::Linear(784, 256), torch::nn::ReLU(), torch::nn::Linear(256, 256),
                               torch::nn::ReLU(), torch::nn::Linear(256, 10));
}

void sync(const c10::Device& d) {
  if (d.is_cuda()) torch::cuda::synchronize();
}

// Hand-written loop: zero_grad, forward, cross entropy, backward, SGD step.
double run_hand(const composer::Batch& data, int64_t batches, const c10::Device& device) {
  auto net = make_mlp(0);
  net->to(device);
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  composer::TensorDataLoader loader(data, composer::TensorDataLoaderOptions(64).shuffle(true).seed(1));
  loader.reset();
  sync(device);
  const auto start = Clock::now();
  for (int64_t i = 0; i < batches; ++i) {
    auto b = loader.next();
    if (!b) {
      loader.reset();
      b = loader.next();
    }
    const composer::Batch batch = b->to(device);
    opt.zero_grad();
    at::Tensor loss = at::cross_entropy_loss(net->forward(batch.input()), batch.target());
    loss.backward();
    opt.step();
    (void)loss.item<float>();  // a real loop logs its loss
  }
  sync(device);
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double run_trainer(const composer::Batch& data, int64_t batches, const std::string& device) {
  auto model = composer::ComposerClassifier::wrap(make_mlp(0));
  auto opt = std::make_shared<torch::optim::SGD>(model->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  auto loader =
      std::make_shared<composer::TensorDataLoader>(data, composer::TensorDataLoaderOptions(64).shuffle(true).seed(1));
  composer::Trainer trainer(composer::TrainerOptions(model)
                                .train_dataloader(loader)
                                .optimizer(opt)
                                .max_duration(composer::Time(batches, composer::TimeUnit::BATCH))
                                .progress_bar(false)
                                .device(device)
                                .precision(composer::Precision::FP32)
                                .seed(0));
  const c10::Device d(device);
  sync(d);
  const auto start = Clock::now();
  trainer.fit();
  sync(d);
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 7;
  int64_t batches = 300;
  std::string device = "cpu";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--rounds"))
      rounds = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--batches"))
      batches = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--device"))
      device = argv[i + 1];
    else {
      std::fprintf(stderr, "unknown option %s\n", argv[i]);
      return 2;
    }
  }
  composer::configure_threads();
  const c10::Device d(device);
  auto gen = at::detail::createCPUGenerator(3);
  const composer::Batch data(at::randn({64 * 50, 784}, gen), at::randint(0, 10, {64 * 50}, gen));
  std::printf(
      "trainer_overhead: MLP 784-256-256-10, batch 64, SGD momentum, %lld batches x %d rounds, device %s, %d threads\n",
      static_cast<long long>(batches), rounds, device.c_str(), at::get_num_threads());
  run_hand(data, 20, d);  // warm-up both paths
  run_trainer(data, 20, device);
  std::vector<double> hand, trainer, ratios;
  for (int r = 0; r < rounds; ++r) {  // interleaved, alternating which goes first
    double h, t;
    if (r % 2 == 0) {
      h = run_hand(data, batches, d);
      t = run_trainer(data, batches, device);
    } else {
      t = run_trainer(data, batches, device);
      h = run_hand(data, batches, d);
    }
    hand.push_back(h);
    trainer.push_back(t);
    ratios.push_back(t / h);
    std::printf("round %d: hand %.1f us/step, trainer %.1f us/step, ratio %.4f\n", r, 1e6 * h / batches,
                1e6 * t / batches, t / h);
  }
  std::sort(ratios.begin(), ratios.end());
  std::sort(hand.begin(), hand.end());
  std::sort(trainer.begin(), trainer.end());
  const double median_ratio = ratios[ratios.size() / 2];
  std::printf("median: hand %.1f us/step, trainer %.1f us/step\n", 1e6 * hand[hand.size() / 2] / batches,
              1e6 * trainer[trainer.size() / 2] / batches);
  std::printf("RESULT trainer_overhead ratio=%.4f\n", median_ratio);
  return 0;
}
