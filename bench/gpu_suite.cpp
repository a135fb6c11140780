// bench/gpu_suite: one training configuration of the GPU suite (bench/gpu_suite.sh runs them all, interleaved, beside
// the Python references in bench/python/gpu_reference.py, and writes bench/results/gpu.md).
//   gpu_suite --model gpt2|mlp|resnet50 --mode hand|trainer|trainer_graph [--steps N] [--warmup N] [--small]
// Models and sizes of ../shared/reference/gpu-anchors.md: GPT-2 124M at 16 x 1024 tokens, bf16, DecoupledAdamW
// (fused); the MLP 784-4x1024-10 at batch 128, fp32, SGD; ResNet-50 at 224 px, batch 256, bf16, channels_last, SGD.
// Same synthetic device-resident batch every step, so the step is measured, not data loading.
//   hand           the loop a user would write: forward, losses, backward, optimizer step, zero_grad
//   trainer        the same model and optimizer through Trainer::fit
//   trainer_graph  the Trainer with cuda_graph: true
// --small shrinks every model and batch so that a CPU machine checks the plumbing (trainer_graph needs CUDA).
// Prints "RESULT model=.. mode=.. device=.. ms_per_step=..".
#include "composer/composer.h"
#include "repeat_loader.h"

#include <torch/cuda.h>

#include <chrono>
#include <cstdio>
#include <string>

using namespace composer;

namespace {

struct Setup {
  std::shared_ptr<ComposerModel> model;
  std::shared_ptr<torch::optim::Optimizer> optimizer;
  std::vector<std::shared_ptr<Algorithm>> algorithms;
  Batch batch;
  Precision precision = Precision::FP32;
};

Setup make_setup(const std::string& name, bool small, const c10::Device& device) {
  torch::manual_seed(0);
  Setup s;
  if (name == "gpt2") {
    auto cfg = models::TransformerConfig();  // GPT-2 small: 12 x 768, 12 heads, 50257 tokens, 1024 positions
    int64_t batch = 16, seq = 1024;
    if (small) {
      cfg.vocab_size(512).max_seq_len(64).n_layer(2).n_head(2).d_model(64);
      batch = 4;
      seq = 64;
    }
    s.model = std::make_shared<ComposerLanguageModel>(std::make_shared<models::GPT>(cfg), /*bert=*/false);
    const at::Tensor ids = at::randint(cfg.vocab_size(), {batch, seq}, at::TensorOptions().dtype(at::kLong));
    s.batch = Batch({{"input_ids", ids}, {"labels", ids.clone()}});
    s.precision = device.is_cuda() ? Precision::AMP_BF16 : Precision::FP32;
    s.model->to(device);
    s.optimizer = std::make_shared<optim::DecoupledAdamW>(s.model->parameters(), optim::DecoupledAdamWOptions(6e-4));
  } else if (name == "mlp") {
    const int64_t width = small ? 64 : 1024, batch = small ? 16 : 128;
    s.model = ComposerClassifier::wrap(models::mlp(784, {width, width, width, width}, 10));
    s.batch = Batch(at::randn({batch, 784}), at::randint(0, 10, {batch}));
    s.model->to(device);
    s.optimizer = std::make_shared<optim::DecoupledSGDW>(s.model->parameters(), optim::DecoupledSGDWOptions(0.01));
  } else if (name == "resnet50") {
    const int64_t batch = small ? 4 : 256, size = small ? 32 : 224;
    s.model = ComposerClassifier::wrap(models::resnet(small ? 18 : 50, 1000));
    s.batch = Batch(at::randn({batch, 3, size, size}), at::randint(0, 1000, {batch}));
    s.precision = device.is_cuda() ? Precision::AMP_BF16 : Precision::FP32;
    s.model->to(device);
    functional::apply_channels_last(*s.model);  // the hand loop's channels_last; the Trainer's runs it again (no-op)
    s.algorithms.push_back(std::make_shared<algorithms::ChannelsLast>());
    s.optimizer =
        std::make_shared<optim::DecoupledSGDW>(s.model->parameters(), optim::DecoupledSGDWOptions(0.1).momentum(0.9));
  } else {
    throw std::invalid_argument("--model: expected gpt2, mlp or resnet50, got '" + name + "'");
  }
  s.batch = s.batch.to(device);
  if (name == "resnet50") s.batch.set(int64_t{0}, s.batch.input().contiguous(at::MemoryFormat::ChannelsLast));
  return s;
}

void synchronize(const c10::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize();
}

using Clock = std::chrono::steady_clock;

double hand_loop_ms(Setup& s, int64_t steps, int64_t warmup, const c10::Device& device) {
  PrecisionContext precision(s.precision, device);
  auto step = [&] {
    at::Tensor loss;
    {
      auto autocast = precision.enter();
      const at::Tensor outputs = s.model->forward(s.batch);
      loss = s.model->losses(outputs, s.batch).at("total");
    }
    loss.backward();
    s.optimizer->step();
    s.optimizer->zero_grad(/*set_to_none=*/true);
    return loss.detach();
  };
  for (int64_t i = 0; i < warmup; ++i) step();
  synchronize(device);
  const auto start = Clock::now();
  double sink = 0;
  for (int64_t i = 0; i < steps; ++i) sink += step().item<double>();  // the Trainer reads each loss too
  synchronize(device);
  if (!std::isfinite(sink)) std::fprintf(stderr, "warning: non-finite loss\n");
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count() / static_cast<double>(steps);
}

double trainer_ms(Setup& s, int64_t steps, int64_t warmup, bool graph, const c10::Device& device) {
  auto loader = std::make_shared<bench::RepeatLoader>(s.batch, 1'000'000);
  Trainer trainer(TrainerOptions(s.model)
                      .train_dataloader(loader)
                      .optimizer(s.optimizer)
                      .algorithms(s.algorithms)
                      .max_duration(Time::from_batch(warmup))
                      .device(device.str())
                      .precision(s.precision)
                      .cuda_graph(graph)
                      .cuda_graph_warmup_steps(std::max<int64_t>(1, warmup - 2))
                      .progress_bar(false)
                      .seed(0));
  trainer.fit();  // the warm-up steps, the graph's recording among them
  synchronize(device);
  const auto start = Clock::now();
  trainer.fit(Time::from_batch(steps));
  synchronize(device);
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count() / static_cast<double>(steps);
}

}  // namespace

int main(int argc, char** argv) {
  std::string model = "mlp", mode = "hand";
  int64_t steps = 0, warmup = 0;
  bool small = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(a + ": expected a value");
      return argv[++i];
    };
    if (a == "--model") {
      model = value();
    } else if (a == "--mode") {
      mode = value();
    } else if (a == "--steps") {
      steps = std::stoll(value());
    } else if (a == "--warmup") {
      warmup = std::stoll(value());
    } else if (a == "--small") {
      small = true;
    } else {
      std::fprintf(stderr, "gpu_suite: unknown option %s\n", a.c_str());
      return 2;
    }
  }
  // Anchors' step counts: MLP 300 timed steps, ResNet-50 25, GPT-2 20.
  if (steps == 0) steps = model == "mlp" ? 300 : model == "gpt2" ? 20 : 25;
  if (warmup == 0) warmup = model == "mlp" ? 50 : 8;
  try {
    configure_threads();
    tune_allocator();  // what the Trainer does at its start; the hand loop gets it too
    const c10::Device device = torch::cuda::is_available() ? c10::Device(c10::kCUDA, 0) : c10::Device(c10::kCPU);
    Setup s = make_setup(model, small, device);
    double ms = 0;
    if (mode == "hand") {
      ms = hand_loop_ms(s, steps, warmup, device);
    } else if (mode == "trainer" || mode == "trainer_graph") {
      ms = trainer_ms(s, steps, warmup, mode == "trainer_graph", device);
    } else {
      throw std::invalid_argument("--mode: expected hand, trainer or trainer_graph, got '" + mode + "'");
    }
    std::printf("RESULT model=%s mode=%s device=%s steps=%lld ms_per_step=%.4f\n", model.c_str(), mode.c_str(),
                device.str().c_str(), static_cast<long long>(steps), ms);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_suite: %s\n", brief_error(e).c_str());
    return 1;
  }
  return 0;
}
