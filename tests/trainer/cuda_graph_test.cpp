// cuda_graph: true (TrainStepOptions). What stands in the way of recording is named (checked here on a State, no
// GPU needed), a CPU run is refused with those names, and on a CUDA device the replayed steps reach the weights and
// losses of the same run done eagerly (skipped without one; tools/device/run_checks.sh and bench/gpu_suite.sh run
// it on the GPU machine).
#include "support/errors.h"
#include "support/test_support.h"

#include <gtest/gtest.h>
#include <torch/cuda.h>

namespace composer {
namespace {

bool mentions(const std::vector<std::string>& lines, const std::string& needle) {
  for (const auto& l : lines)
    if (l.find(needle) != std::string::npos) return true;
  return false;
}

TEST(CudaGraphTest, ObstaclesNameEachSettingThatStopsTheRecording) {
  State s;
  s.model = testing::make_classifier();
  s.device = c10::Device(c10::kCPU);
  s.precision = Precision::AMP_FP16;
  s.auto_microbatching = true;
  s.optimizer = std::make_shared<torch::optim::SGD>(s.model->parameters(), torch::optim::SGDOptions(0.1));
  s.algorithms = {
      std::make_shared<algorithms::LabelSmoothing>(),
      std::make_shared<algorithms::GradientClipping>(
          algorithms::GradientClippingOptions().clipping_type(functional::ClippingType::NORM).clipping_threshold(1.0)),
      std::make_shared<algorithms::EMA>()};
  const auto found = TrainStep::cuda_graph_obstacles(s);
  EXPECT_TRUE(mentions(found, "the device is cpu")) << ::testing::PrintToString(found);
  EXPECT_TRUE(mentions(found, "amp_fp16")) << ::testing::PrintToString(found);
  EXPECT_TRUE(mentions(found, "device_train_microbatch_size auto")) << ::testing::PrintToString(found);
  EXPECT_TRUE(mentions(found, "the optimizer SGD cannot be recorded")) << ::testing::PrintToString(found);
  EXPECT_TRUE(mentions(found, "LabelSmoothing acts on BEFORE_LOSS")) << ::testing::PrintToString(found);
  EXPECT_TRUE(mentions(found, "GradientClipping acts on AFTER_TRAIN_BATCH")) << ::testing::PrintToString(found);
  EXPECT_FALSE(mentions(found, "EMA")) << "EMA acts at BATCH_END, after the step: " << ::testing::PrintToString(found);
  EXPECT_EQ(found.size(), 6u) << ::testing::PrintToString(found);

  // The same run set up for recording: a CUDA device (a value only; nothing runs), bf16, a capturable optimizer,
  // algorithms outside the step.
  s.device = c10::Device(c10::kCUDA, 0);
  s.precision = Precision::AMP_BF16;
  s.auto_microbatching = false;
  s.optimizer = std::make_shared<optim::DecoupledAdamW>(s.model->parameters());
  s.algorithms = {std::make_shared<algorithms::EMA>(), std::make_shared<algorithms::ChannelsLast>()};
  EXPECT_EQ(TrainStep::cuda_graph_obstacles(s), std::vector<std::string>{});
}

TEST(CudaGraphTest, TrainerRefusesARunItCannotRecord) {
  const Batch data = testing::make_blobs(32);
  auto options = [&] {
    return testing::quiet_options(testing::make_classifier())
        .train_dataloader(testing::make_loader(data, 8))
        .max_duration("1ep")
        .cuda_graph(true);
  };
  const std::string on_cpu = testing::error_of([&] { Trainer trainer(options()); });
  EXPECT_NE(on_cpu.find("cuda_graph: true cannot record this run's train step: the device is cpu"), std::string::npos)
      << on_cpu;
  EXPECT_EQ(on_cpu.find('\n'), std::string::npos) << on_cpu;
  testing::expect_error_containing([&] { Trainer trainer(options().cuda_graph_warmup_steps(0)); },
                                   "cuda_graph_warmup_steps must be >= 1");
  // A bad value is an error without cuda_graph too, as every other option.
  testing::expect_error_containing([&] { Trainer trainer(options().cuda_graph(false).cuda_graph_warmup_steps(-1)); },
                                   "cuda_graph_warmup_steps must be >= 1");
}

// Eager and recorded runs of the same training: MLP in fp32 with DecoupledSGDW (momentum, decay, a schedule), and a
// GPT in amp_bf16 with DecoupledAdamW; 10 batches and a last smaller one (run eagerly).
struct GraphRun {
  std::vector<at::Tensor> weights;
  std::vector<double> losses;
};

class LossRecorder : public Callback {
 public:
  void batch_end(State& state, Logger&) override { losses.push_back(state.loss.item<double>()); }
  std::vector<double> losses;
};

GraphRun train_on_cuda(bool gpt, bool graph) {
  std::shared_ptr<ComposerModel> model;
  Batch data;
  if (gpt) {
    torch::manual_seed(3);
    auto net = std::make_shared<models::GPT>(
        models::TransformerConfig().vocab_size(64).max_seq_len(32).n_layer(2).n_head(2).d_model(32));
    model = std::make_shared<ComposerLanguageModel>(net, /*bert=*/false);
    const at::Tensor ids = at::randint(64, {84, 32}, at::TensorOptions().dtype(at::kLong));
    data = Batch({{"input_ids", ids}, {"labels", ids.clone()}});
  } else {
    model = testing::make_classifier(64, 256, 10, /*seed=*/3);
    data = testing::make_blobs(84, 64, 10);
  }
  std::shared_ptr<torch::optim::Optimizer> optimizer;
  if (gpt) {
    optimizer = std::make_shared<optim::DecoupledAdamW>(model->parameters(), optim::DecoupledAdamWOptions(1e-3));
  } else {
    optimizer = std::make_shared<optim::DecoupledSGDW>(
        model->parameters(), optim::DecoupledSGDWOptions(0.05).momentum(0.9).weight_decay(1e-4));
  }
  auto recorder = std::make_shared<LossRecorder>();
  Trainer trainer(TrainerOptions(model)
                      .progress_bar(false)
                      .seed(42)
                      .device("cuda")
                      .precision(gpt ? Precision::AMP_BF16 : Precision::FP32)
                      .optimizer(optimizer)
                      .schedulers({std::make_shared<CosineAnnealingWithWarmupScheduler>(Time::from_batch(2))})
                      .train_dataloader(testing::make_loader(data, 8, /*shuffle=*/false))
                      .callbacks({recorder})
                      .max_duration("1ep")
                      .cuda_graph(graph)
                      .cuda_graph_warmup_steps(2));
  trainer.fit();
  GraphRun run;
  for (const auto& p : model->parameters()) run.weights.push_back(p.detach().cpu());
  run.losses = recorder->losses;
  return run;
}

TEST(CudaGraphTest, ReplayedStepsEqualEagerSteps) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "needs a CUDA device (tools/device/run_checks.sh runs it)";
  for (bool gpt : {false, true}) {
    SCOPED_TRACE(gpt ? "GPT, amp_bf16, DecoupledAdamW" : "MLP, fp32, DecoupledSGDW");
    const GraphRun eager = train_on_cuda(gpt, false), graphed = train_on_cuda(gpt, true);
    ASSERT_EQ(eager.losses.size(), 11u);
    ASSERT_EQ(graphed.losses.size(), 11u);
    const double tol = gpt ? 2e-2 : 1e-5;
    for (size_t i = 0; i < eager.losses.size(); ++i)
      EXPECT_NEAR(graphed.losses[i], eager.losses[i], tol * std::max(1.0, std::abs(eager.losses[i]))) << "batch " << i;
    ASSERT_EQ(eager.weights.size(), graphed.weights.size());
    for (size_t i = 0; i < eager.weights.size(); ++i) {
      const double diff = (eager.weights[i] - graphed.weights[i]).abs().max().item<double>();
      EXPECT_LT(diff, gpt ? 1e-2 : 1e-5) << "parameter " << i;
      EXPECT_GT(eager.weights[i].abs().max().item<double>(), 0.0);
    }
    EXPECT_LT(graphed.losses.back(), graphed.losses.front()) << "the recorded run learns";
  }
}

}  // namespace
}  // namespace composer
