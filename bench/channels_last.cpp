// bench/channels_last: training step time of a ResNet through the Trainer, NCHW vs ChannelsLast, in one run.
//   channels_last [--depth 50] [--batch 256] [--size 224] [--steps 25] [--warmup 5] [--precision amp_bf16]
// Reference: ResNet-50, 224 px, batch 256, SGD, bf16 on an H200 measured by hand at 105.6 ms (NCHW) and 55.4 ms
// (channels_last) per step, 1.9x (../shared/reference/gpu-anchors.md). On a CPU machine use small sizes
// (--depth 18 --batch 8 --size 64) to check the path; the numbers that matter come from the GPU.
#include "composer/composer.h"
#include "repeat_loader.h"

#include <torch/cuda.h>

#include <chrono>
#include <cstdio>
#include <string>

using namespace composer;

namespace {

double step_ms(bool channels_last, int64_t depth, int64_t batch, int64_t size, int64_t steps, int64_t warmup,
               Precision precision, const c10::Device& device) {
  torch::manual_seed(0);
  auto model = ComposerClassifier::wrap(models::resnet(depth, 1000));
  const Batch data(torch::randn({batch, 3, size, size}).to(device), torch::randint(0, 1000, {batch}).to(device));
  auto loader = std::make_shared<bench::RepeatLoader>(data, warmup + steps);
  std::vector<std::shared_ptr<Algorithm>> algos;
  if (channels_last) algos.push_back(std::make_shared<algorithms::ChannelsLast>());
  auto opt =
      std::make_shared<optim::DecoupledSGDW>(model->parameters(), optim::DecoupledSGDWOptions(0.1).momentum(0.9));
  Trainer trainer(TrainerOptions(model)
                      .train_dataloader(loader)
                      .optimizer(opt)
                      .algorithms(algos)
                      .max_duration(Time::from_batch(warmup))
                      .device(device.str())
                      .precision(precision)
                      .progress_bar(false)
                      .seed(0));
  trainer.fit();
  if (device.is_cuda()) torch::cuda::synchronize();
  const auto start = std::chrono::steady_clock::now();
  trainer.fit(Time::from_batch(steps));
  if (device.is_cuda()) torch::cuda::synchronize();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() /
         static_cast<double>(steps);
}

}  // namespace

int main(int argc, char** argv) {
  int64_t depth = 50, batch = 256, size = 224, steps = 25, warmup = 5;
  std::string precision = "amp_bf16";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--depth")
      depth = std::stoll(v);
    else if (a == "--batch")
      batch = std::stoll(v);
    else if (a == "--size")
      size = std::stoll(v);
    else if (a == "--steps")
      steps = std::stoll(v);
    else if (a == "--warmup")
      warmup = std::stoll(v);
    else if (a == "--precision")
      precision = v;
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  configure_threads();
  const c10::Device device = torch::cuda::is_available() ? c10::Device(c10::kCUDA, 0) : c10::Device(c10::kCPU);
  const Precision p = parse_precision(precision);
  // Interleaved: NCHW, channels_last, NCHW, channels_last; the ratio uses the means.
  double nchw = 0, cl = 0;
  for (int r = 0; r < 2; ++r) {
    nchw += step_ms(false, depth, batch, size, steps, warmup, p, device) / 2;
    cl += step_ms(true, depth, batch, size, steps, warmup, p, device) / 2;
  }
  std::printf(
      "RESULT channels_last device=%s depth=%lld batch=%lld size=%lld precision=%s nchw_ms=%.2f channels_last_ms=%.2f "
      "speedup=%.3f\n",
      device.str().c_str(), static_cast<long long>(depth), static_cast<long long>(batch), static_cast<long long>(size),
      precision.c_str(), nchw, cl, nchw / cl);
  return 0;
}
