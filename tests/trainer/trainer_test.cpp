#include "support/errors.h"
#include "support/run_files.h"
#include "support/test_support.h"

#include <gtest/gtest.h>

#include <cmath>

namespace composer {
namespace {

// A Trainer with no algorithms gives bitwise the same weights as a hand-written LibTorch loop.
TEST(TrainerParityTest, BitwiseEqualToHandWrittenLoop) {
  const Batch data = testing::make_blobs(96);
  // Hand-written loop.
  auto net = testing::make_mlp(8, 32, 4, /*seed=*/5);
  torch::optim::SGD hand_opt(net->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  auto hand_loader = testing::make_loader(data, 16);
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    hand_loader->set_epoch(epoch);
    hand_loader->reset();
    while (auto b = hand_loader->next()) {
      hand_opt.zero_grad();
      at::Tensor loss = at::cross_entropy_loss(net->forward(b->input()), b->target());
      loss.backward();
      hand_opt.step();
    }
  }
  // The same through the Trainer.
  auto model = testing::make_classifier(8, 32, 4, /*seed=*/5);
  auto opt = std::make_shared<torch::optim::SGD>(model->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  Trainer trainer(testing::quiet_options(model)
                      .train_dataloader(testing::make_loader(data, 16))
                      .optimizer(opt)
                      .max_duration("2ep"));
  trainer.fit();
  const auto hand = net->named_parameters();
  for (const auto& kv : model->named_parameters()) {
    const std::string key = kv.key().substr(std::string("module.").size());
    EXPECT_TRUE(torch::equal(kv.value(), hand[key])) << key;
  }
}

std::vector<at::Tensor> train_with_microbatch(int64_t microbatch) {
  const Batch data = testing::make_blobs(96, 8, 4, 1, at::kDouble);
  auto model = testing::make_classifier(8, 16, 4, 3, at::kDouble);
  auto opt = std::make_shared<torch::optim::SGD>(model->parameters(), torch::optim::SGDOptions(0.1));
  Trainer trainer(testing::quiet_options(model)
                      .train_dataloader(testing::make_loader(data, 32))
                      .optimizer(opt)
                      .max_duration("3ba")
                      .device_train_microbatch_size(microbatch));
  trainer.fit();
  std::vector<at::Tensor> out;
  for (auto& p : model->parameters()) out.push_back(p.detach().clone());
  return out;
}

TEST(TrainerMicrobatchTest, FourMicrobatchesOfEightEqualOneBatchOfThirtyTwo) {
  const auto whole = train_with_microbatch(0);
  const auto split = train_with_microbatch(8);
  ASSERT_EQ(whole.size(), split.size());
  for (size_t i = 0; i < whole.size(); ++i) {
    EXPECT_LT((whole[i] - split[i]).abs().max().item<double>(), 1e-10) << "parameter " << i;
  }
  const auto uneven = train_with_microbatch(12);  // 12 + 12 + 8: weights still equal
  for (size_t i = 0; i < whole.size(); ++i) EXPECT_LT((whole[i] - uneven[i]).abs().max().item<double>(), 1e-10);
}

// A tiny GPT trained 3 steps on 8 sequences whose labels end in -100 padding of different lengths (sample i has 2i
// masked labels), in microbatches of `microbatch` (0: the whole batch), weighted by samples or by tokens.
std::vector<at::Tensor> train_padded_lm(int64_t microbatch, bool on_tokens, bool all_masked = false) {
  torch::manual_seed(11);
  auto model = std::make_shared<ComposerLanguageModel>(std::make_shared<models::GPT>(
      models::TransformerConfig().vocab_size(13).max_seq_len(16).n_layer(1).n_head(2).d_model(8)));
  const at::Tensor tokens = at::randint(0, 13, {8, 17}, at::TensorOptions().dtype(at::kLong));
  at::Tensor labels = tokens.narrow(1, 1, 16).clone();
  for (int64_t i = 0; i < 8; ++i) labels[i].narrow(0, 16 - 2 * i, 2 * i).fill_(-100);
  if (all_masked) labels.fill_(-100);
  const Batch data({{"input_ids", tokens.narrow(1, 0, 16).contiguous()}, {"labels", labels}});
  auto opt = std::make_shared<torch::optim::SGD>(model->parameters(), torch::optim::SGDOptions(0.5));
  Trainer trainer(testing::quiet_options(model)
                      .train_dataloader(std::make_shared<TensorDataLoader>(data, TensorDataLoaderOptions(8)))
                      .optimizer(opt)
                      .max_duration("3ba")
                      .accumulate_train_batch_on_tokens(on_tokens)
                      .device_train_microbatch_size(microbatch));
  trainer.fit();
  std::vector<at::Tensor> out;
  for (auto& p : model->parameters()) out.push_back(p.detach().clone());
  return out;
}

double largest_difference(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, (a[i] - b[i]).abs().max().item<double>());
  return d;
}

// accumulate_train_batch_on_tokens (Composer's): microbatches weighted by their loss-generating tokens give the
// per-token mean of the whole batch, as one microbatch computes it; weighted by samples, the short microbatches
// count too much.
TEST(TrainerMicrobatchTest, TokenWeightedMicrobatchesEqualTheWholeBatch) {
  const auto whole = train_padded_lm(0, false);
  EXPECT_EQ(largest_difference(whole, train_padded_lm(0, true)), 0.0);  // one microbatch: weight 1 either way
  EXPECT_LT(largest_difference(whole, train_padded_lm(2, true)), 2e-6);
  EXPECT_LT(largest_difference(whole, train_padded_lm(3, true)), 2e-6);  // 3 + 3 + 2
  EXPECT_GT(largest_difference(whole, train_padded_lm(2, false)), 1e-3);
  const std::string none = testing::any_error_of([] { train_padded_lm(2, true, /*all_masked=*/true); });
  EXPECT_NE(none.find("accumulate_train_batch_on_tokens: the batch has no loss-generating token on any rank"),
            std::string::npos)
      << none;
}

// Out-of-memory errors from the real CPU allocator: a 1 PiB request fails in posix_memalign. LibTorch raises it as
// a plain c10::Error; is_out_of_memory recognises it, and std::bad_alloc, but not other LibTorch errors.
TEST(AutoMicrobatchTest, OutOfMemoryIsRecognisedByTheAllocatorsError) {
  bool caught = false;
  try {
    at::empty({int64_t{1} << 50}, at::kByte);
  } catch (const std::exception& e) {
    caught = true;
    EXPECT_TRUE(is_out_of_memory(e)) << e.what();
  }
  EXPECT_TRUE(caught);
  try {
    at::mm(at::ones({2, 3}), at::ones({2, 3}));
    ADD_FAILURE() << "mm of mismatched shapes should throw";
  } catch (const std::exception& e) {
    EXPECT_FALSE(is_out_of_memory(e)) << e.what();
  }
  EXPECT_TRUE(is_out_of_memory(std::bad_alloc()));
  EXPECT_TRUE(is_out_of_memory(OutOfMemoryOnAnotherRank()));
  EXPECT_FALSE(is_out_of_memory(std::runtime_error("CUDA out of memory")));  // only LibTorch's errors by text
}

// Stands for activations that grow with the microbatch: a microbatch of more than `fits` samples asks the CPU
// allocator for 1 PiB at BEFORE_FORWARD, which it cannot give.
class NeedsMemoryPerSample : public Callback {
 public:
  explicit NeedsMemoryPerSample(int64_t fits) : fits_(fits) {}
  void before_forward(State& s, Logger&) override {
    if (s.batch.num_samples() > fits_) (void)at::empty({int64_t{1} << 50}, at::kByte);
  }

 private:
  int64_t fits_;
};

struct AutoRun {
  std::vector<at::Tensor> weights;
  std::vector<Event> events;
  int64_t final_size;
};

AutoRun train_auto(MicrobatchSize size, std::vector<std::shared_ptr<Callback>> extra = {}) {
  const Batch data = testing::make_blobs(96, 8, 4, 1, at::kDouble);
  auto model = testing::make_classifier(8, 16, 4, 3, at::kDouble);
  auto opt = std::make_shared<torch::optim::SGD>(model->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  auto recorder = std::make_shared<testing::RecordingCallback>();
  extra.push_back(recorder);
  Trainer trainer(testing::quiet_options(model)
                      .train_dataloader(testing::make_loader(data, 32))
                      .optimizer(opt)
                      .max_duration("3ba")
                      .callbacks(extra)
                      .device_train_microbatch_size(size));
  trainer.fit();
  AutoRun r{{}, recorder->events, trainer.state().device_train_microbatch_size};
  for (auto& p : model->parameters()) r.weights.push_back(p.detach().clone());
  return r;
}

// The first batch fails at 32 and 16 samples and fits at 8: BEFORE_TRAIN_BATCH fires three times for it, once for
// the others, and the weights are those of a run with 8 from the start.
TEST(AutoMicrobatchTest, RedoesTheBatchFromBeforeTrainBatchAndEqualsTheFoundSize) {
  const AutoRun automatic = train_auto(MicrobatchSize::automatic(), {std::make_shared<NeedsMemoryPerSample>(8)});
  EXPECT_EQ(automatic.final_size, 8);
  EXPECT_EQ(std::count(automatic.events.begin(), automatic.events.end(), Event::BEFORE_TRAIN_BATCH), 5);
  EXPECT_EQ(std::count(automatic.events.begin(), automatic.events.end(), Event::AFTER_TRAIN_BATCH), 3);
  EXPECT_EQ(std::count(automatic.events.begin(), automatic.events.end(), Event::AFTER_BACKWARD), 12);
  const AutoRun fixed = train_auto(MicrobatchSize(8));
  ASSERT_EQ(automatic.weights.size(), fixed.weights.size());
  for (size_t i = 0; i < fixed.weights.size(); ++i) EXPECT_TRUE(automatic.weights[i].equal(fixed.weights[i])) << i;
}

class FailsAtForward : public Callback {
 public:
  void before_forward(State&, Logger&) override { throw std::invalid_argument("input has the wrong shape"); }
};

// Only running out of memory is retried; any other error ends the step as it would without "auto".
TEST(AutoMicrobatchTest, OtherErrorsAreNotRetried) {
  testing::expect_error_containing(
      [] { train_auto(MicrobatchSize::automatic(), {std::make_shared<FailsAtForward>()}); }, "wrong shape");
}

class DtypeProbe : public Callback {
 public:
  void after_forward(State& s, Logger&) override { dtype = s.outputs.scalar_type(); }
  at::ScalarType dtype = at::kFloat;
};

TEST(TrainerPrecisionTest, Bf16AutocastOnCpuTrains) {
  auto probe = std::make_shared<DtypeProbe>();
  auto mem = std::make_shared<InMemoryLogger>();
  auto model = testing::make_classifier(8, 32, 4);
  Trainer trainer(testing::quiet_options(model)
                      .train_dataloader(testing::make_loader(testing::make_blobs(256), 32))
                      .max_duration("6ep")
                      .precision(Precision::AMP_BF16)
                      .callbacks({probe})
                      .loggers({mem}));
  trainer.fit();
  EXPECT_EQ(probe->dtype, at::kBFloat16);
  for (auto& p : model->parameters()) EXPECT_EQ(p.scalar_type(), at::kFloat);  // fp32 master weights
  const auto losses = mem->values("loss/train/total");
  ASSERT_EQ(losses.size(), 48u);
  const double first = (losses[0] + losses[1] + losses[2]) / 3, last = (losses[45] + losses[46] + losses[47]) / 3;
  EXPECT_LT(last, 0.7 * first);
}

TEST(TrainerPrecisionTest, Fp16NeedsCuda) {
  EXPECT_THROW(Trainer(testing::quiet_options(testing::make_classifier()).precision(Precision::AMP_FP16)),
               std::invalid_argument);
}

using testing::StopAtBatch;

TEST(TrainerTest, CallbackCanStopTraining) {
  Trainer trainer(testing::quiet_options(testing::make_classifier())
                      .train_dataloader(testing::make_loader(testing::make_blobs(64), 8))
                      .max_duration("10ep")
                      .callbacks({std::make_shared<StopAtBatch>(5)}));
  trainer.fit();
  EXPECT_EQ(trainer.state().timestamp.batch, 5);
  EXPECT_EQ(*trainer.state().max_duration, Time(5, TimeUnit::BATCH));
}

TEST(TrainerTest, DurationInSamplesAndFitExtension) {
  Trainer trainer(testing::quiet_options(testing::make_classifier())
                      .train_dataloader(testing::make_loader(testing::make_blobs(64), 8))
                      .max_duration(Time(40, TimeUnit::SAMPLE)));
  trainer.fit();
  EXPECT_EQ(trainer.state().timestamp.sample, 40);
  EXPECT_THROW(trainer.fit(), std::invalid_argument);  // already reached
  trainer.fit(Time(3, TimeUnit::BATCH));
  EXPECT_EQ(trainer.state().timestamp.batch, 8);
  trainer.fit(Time(1, TimeUnit::BATCH), /*reset_time=*/true);
  EXPECT_EQ(trainer.state().timestamp.batch, 1);
}

TEST(TrainerTest, SeveralEvaluatorsWithLabelsIntervalsAndSubsets) {
  auto mem = std::make_shared<InMemoryLogger>();
  Evaluator a;
  a.label = "val_a";
  a.dataloader = testing::make_loader(testing::make_blobs(40, 8, 4, 3), 10, false);
  a.eval_interval = Time(2, TimeUnit::BATCH);
  a.subset_num_batches = 2;
  Evaluator b;
  b.label = "val_b";
  b.dataloader = testing::make_loader(testing::make_blobs(20, 8, 4, 4), 10, false);
  b.metric_names = {"Acc"};
  Trainer trainer(testing::quiet_options(testing::make_classifier())
                      .train_dataloader(testing::make_loader(testing::make_blobs(48), 8))  // 6 batches/epoch
                      .evaluators({a, b})
                      .max_duration("2ep")
                      .loggers({mem}));
  trainer.fit();
  EXPECT_EQ(mem->values("metrics/val_a/Accuracy").size(), 6u);  // every 2 batches of 12
  EXPECT_EQ(mem->values("metrics/val_a/CrossEntropy").size(), 6u);
  EXPECT_EQ(mem->values("metrics/val_b/Accuracy").size(), 2u);     // every epoch (the trainer's eval_interval)
  EXPECT_TRUE(mem->values("metrics/val_b/CrossEntropy").empty());  // filtered by metric_names
  const auto& state = trainer.state();
  EXPECT_EQ(state.eval_timestamp.batch, 2);  // the last evaluation (val_b) ran 2 batches
}

TEST(TrainerTest, LogsComposerMetricKeys) {
  auto mem = std::make_shared<InMemoryLogger>();
  Trainer trainer(testing::quiet_options(testing::make_classifier())
                      .train_dataloader(testing::make_loader(testing::make_blobs(64), 8))
                      .eval_dataloader(testing::make_loader(testing::make_blobs(16), 8, false))
                      .max_duration("2ep")
                      .loggers({mem})
                      .callbacks({std::make_shared<SpeedMonitor>(4), std::make_shared<LRMonitor>()}));
  trainer.fit();
  for (const char* key : {"loss/train/total", "metrics/train/Accuracy", "metrics/eval/Accuracy",
                          "metrics/eval/CrossEntropy", "lr-DecoupledSGDW/group0", "throughput/samples_per_sec",
                          "throughput/batches_per_sec", "time/epoch", "time/batch", "time/sample", "time/train"}) {
    EXPECT_FALSE(mem->values(key).empty()) << key;
  }
  EXPECT_DOUBLE_EQ(mem->most_recent_values.at("lr-DecoupledSGDW/group0"), 0.1);  // Composer's default optimizer
  EXPECT_EQ(mem->hyperparameters.at("rank_zero_seed").get<uint64_t>(), 42u);
  EXPECT_GT(mem->most_recent_values.at("throughput/samples_per_sec"), 0.0);
}

class LrAtBatchStart : public Callback {
 public:
  void batch_start(State& s, Logger&) override { lrs.push_back(s.optimizer->param_groups()[0].options().get_lr()); }
  std::vector<double> lrs;
};

// Composer steps LambdaLR after each batch before the timestamp advances: batch k >= 1 uses f(k-1), batch 0 f(0).
TEST(TrainerTest, SchedulerTimingMatchesComposer) {
  auto probe = std::make_shared<LrAtBatchStart>();
  Trainer trainer(
      testing::quiet_options(testing::make_classifier())
          .train_dataloader(testing::make_loader(testing::make_blobs(64), 8))
          .max_duration("8ba")
          .schedulers({std::make_shared<LinearScheduler>(LinearSchedulerOptions().t_max(Time(8, TimeUnit::BATCH)))})
          .callbacks({probe}));
  trainer.fit();
  ASSERT_EQ(probe->lrs.size(), 8u);
  EXPECT_NEAR(probe->lrs[0], 0.1, 1e-15);
  for (int k = 1; k < 8; ++k) EXPECT_NEAR(probe->lrs[k], 0.1 * (1.0 - (k - 1) / 8.0), 1e-15) << "batch " << k;
}

// The lr at the start of each of `batches` batches under `schedulers`, with `optimizer` (lr 0.1 when it is built).
std::vector<double> scheduled_lrs(const std::string& optimizer,
                                  std::vector<std::shared_ptr<ComposerScheduler>> schedulers, int64_t batches,
                                  const std::string& save_folder = "", const std::string& load_path = "") {
  auto model = testing::make_classifier(8, 16, 4, 3);
  std::shared_ptr<torch::optim::Optimizer> opt;
  if (optimizer == "sgd") opt = std::make_shared<torch::optim::SGD>(model->parameters(), torch::optim::SGDOptions(0.1));
  if (optimizer == "adam")
    opt = std::make_shared<torch::optim::Adam>(model->parameters(), torch::optim::AdamOptions(0.1));
  if (optimizer == "sgdw")
    opt = std::make_shared<optim::DecoupledSGDW>(model->parameters(), optim::DecoupledSGDWOptions(0.1));
  auto probe = std::make_shared<LrAtBatchStart>();
  TrainerOptions o = testing::quiet_options(model)
                         .train_dataloader(testing::make_loader(testing::make_blobs(128), 8))
                         .optimizer(opt)
                         .max_duration(Time(batches, TimeUnit::BATCH))
                         .schedulers(std::move(schedulers))
                         .callbacks({probe});
  if (!save_folder.empty()) o.save_folder(save_folder).save_interval("4ba");
  if (!load_path.empty()) o.load_path(load_path);
  Trainer trainer(o);
  trainer.fit();
  return probe->lrs;
}

// Composer's schedules are LambdaLRs over the lr each group had when training started; LibTorch's own optimizers
// record no initial lr, and scaling their current lr compounded the schedule (a warmup stayed at 0 for good).
TEST(TrainerTest, SchedulersScaleTheStartingLrOfLibTorchOptimizers) {
  const auto warmup = [] {
    return std::vector<std::shared_ptr<ComposerScheduler>>{std::make_shared<LinearWithWarmupScheduler>(
        LinearWithWarmupSchedulerOptions().t_warmup(Time(3, TimeUnit::BATCH)).t_max(Time(10, TimeUnit::BATCH)))};
  };
  const auto step = [] {
    return std::vector<std::shared_ptr<ComposerScheduler>>{
        std::make_shared<StepScheduler>(StepSchedulerOptions().step_size(Time(2, TimeUnit::BATCH)).gamma(0.5))};
  };
  // Batch k >= 1 runs with the factor at k - 1 (Composer's timing): warmup k/3 up to batch 3, then linear to 0 at 10.
  std::vector<double> warmup_expected{0.0};
  std::vector<double> step_expected{0.1};
  for (int k = 1; k < 10; ++k) {
    const double t = k - 1;
    warmup_expected.push_back(0.1 * (t < 3 ? t / 3 : 1.0 - (t - 3) / 7));
    step_expected.push_back(0.1 * std::pow(0.5, std::floor(t / 2)));
  }
  for (const std::string opt : {"sgd", "adam", "sgdw"}) {
    const auto warm = scheduled_lrs(opt, warmup(), 10);
    const auto stepped = scheduled_lrs(opt, step(), 10);
    ASSERT_EQ(warm.size(), 10u) << opt;
    ASSERT_EQ(stepped.size(), 10u) << opt;
    for (size_t k = 0; k < 10; ++k) {
      EXPECT_NEAR(warm[k], warmup_expected[k], 1e-15) << opt << " LinearWithWarmup, batch " << k;
      EXPECT_NEAR(stepped[k], step_expected[k], 1e-15) << opt << " Step, batch " << k;
    }
  }
  // Resumed mid-schedule from a checkpoint, the lrs go on as in the uninterrupted run (the checkpoint keeps the base
  // lrs: the optimizer's own lr is the scheduled one by then).
  for (const std::string opt : {"sgd", "adam"}) {
    const auto dir = testing::fresh_dir("scheduler_resume_" + opt);
    const auto straight = scheduled_lrs(opt, warmup(), 10, (dir / "a").string());
    const auto resumed =
        scheduled_lrs(opt, warmup(), 10, (dir / "b").string(), (dir / "a" / "ep0-ba4-rank0.pt").string());
    ASSERT_EQ(resumed.size(), 6u) << opt;
    for (size_t k = 0; k < 6; ++k)
      EXPECT_NEAR(resumed[k], straight[k + 4], 1e-15) << opt << " resumed, batch " << k + 4;
  }
}

TEST(TrainerTest, ScaleScheduleRatioShortensTraining) {
  Trainer trainer(testing::quiet_options(testing::make_classifier())
                      .train_dataloader(testing::make_loader(testing::make_blobs(64), 8))
                      .max_duration("10ba")
                      .scale_schedule_ratio(0.5));
  trainer.fit();
  EXPECT_EQ(trainer.state().timestamp.batch, 5);
}

TEST(TrainerTest, TrainSubsetLimitsBatchesPerEpoch) {
  Trainer trainer(testing::quiet_options(testing::make_classifier())
                      .train_dataloader(testing::make_loader(testing::make_blobs(64), 8))
                      .train_subset_num_batches(3)
                      .max_duration("2ep"));
  trainer.fit();
  EXPECT_EQ(trainer.state().timestamp.batch, 6);
  EXPECT_EQ(trainer.state().timestamp.epoch, 2);
}

TEST(TrainerTest, BadOptionsAreClearErrors) {
  auto model = testing::make_classifier();
  const auto& expect_error = testing::expect_error_containing;
  expect_error([&] { Trainer t(testing::quiet_options(model).max_duration("0.5dur")); }, "max_duration");
  expect_error([&] { Trainer t(testing::quiet_options(model).device("tpu:9")); }, "device");
  expect_error(
      [&] {
        Trainer t(testing::quiet_options(model)
                      .device_train_microbatch_size(MicrobatchSize::automatic())
                      .profiler(std::make_shared<Profiler>(std::vector<std::shared_ptr<TraceHandler>>{})));
      },
      "profiler");
  expect_error(
      [&] {
        Trainer t(testing::quiet_options(model).max_duration("2ep"));
        t.fit();
      },
      "training data");
  expect_error([&] { Trainer t(testing::quiet_options(model).scale_schedule_ratio(0)); }, "scale_schedule_ratio");
  expect_error([&] { MicrobatchSize::parse("-3"); }, "-3");
  EXPECT_EQ(MicrobatchSize::parse("16").value, 16);
  EXPECT_TRUE(MicrobatchSize::parse("auto").is_auto);
}

// The settings live in the sub-structs the units and the checkpoint module take; Composer's flat names reach them.
TEST(TrainerOptionsTest, SettingsLiveInTheUnitsSubStructsUnderComposersNames) {
  TrainerOptions o(nullptr);
  EXPECT_EQ(o.save().folder(), "");  // no saving unless asked, while CheckpointSaver's own default is a folder
  EXPECT_EQ(CheckpointSaverOptions().folder(), "{run_name}/checkpoints");
  o.save_folder("ckpt")
      .save_interval("2ba")
      .save_num_checkpoints_to_keep(3)
      .eval_interval("3")
      .eval_subset_num_batches(4)
      .train_dataloader_label("tr")
      .train_subset_num_batches(5)
      .scale_schedule_ratio(0.5)
      .load_path("a.pt")
      .load_ignore_keys({"rng"})
      .autoresume(true);
  EXPECT_EQ(o.save().folder(), "ckpt");
  EXPECT_EQ(o.save().save_interval(), Time::from_batch(2));
  EXPECT_EQ(o.save().num_checkpoints_to_keep(), 3);
  EXPECT_EQ(o.eval().eval_interval(), Time::from_epoch(3));
  EXPECT_EQ(o.eval().subset_num_batches(), 4);
  EXPECT_EQ(o.fit().train_dataloader_label(), "tr");
  EXPECT_EQ(o.fit().train_subset_num_batches(), 5);
  EXPECT_EQ(o.train_epoch().scale_schedule_ratio(), 0.5);
  EXPECT_EQ(o.load().path(), "a.pt");
  EXPECT_EQ(o.load().ignore_keys(), std::vector<std::string>{"rng"});
  EXPECT_TRUE(o.load().autoresume());
  EXPECT_EQ(o.save_folder(), "ckpt");  // the flat getters read the same fields

  std::vector<std::string> keys;
  for (const auto& f : describe_fields(TrainerOptions(nullptr))) keys.push_back(f.name);
  EXPECT_EQ(keys, (std::vector<std::string>{"run_name",
                                            "seed",
                                            "max_duration",
                                            "iteration_length",
                                            "train_dataloader_label",
                                            "train_subset_num_batches",
                                            "scale_schedule_ratio",
                                            "step_schedulers_every_batch",
                                            "eval_interval",
                                            "eval_subset_num_batches",
                                            "progress_bar",
                                            "log_to_console",
                                            "console_log_interval",
                                            "log_traces",
                                            "device",
                                            "precision",
                                            "device_train_microbatch_size",
                                            "cuda_graph",
                                            "cuda_graph_warmup_steps",
                                            "accumulate_train_batch_on_tokens",
                                            "deterministic_mode",
                                            "num_threads",
                                            "tune_allocator",
                                            "save_folder",
                                            "save_filename",
                                            "save_latest_filename",
                                            "save_interval",
                                            "save_overwrite",
                                            "save_weights_only",
                                            "save_num_checkpoints_to_keep",
                                            "save_remote_file_name",
                                            "save_num_concurrent_uploads",
                                            "save_async",
                                            "load_path",
                                            "load_weights_only",
                                            "load_strict_model_weights",
                                            "load_ignore_keys",
                                            "load_exclude_algorithms",
                                            "autoresume",
                                            "dist_timeout",
                                            "auto_log_hparams"}));

  Hparams h({{"save_folder", "runs/{run_name}"},
             {"save_interval", "2"},
             {"eval_subset_num_batches", "1"},
             {"load_exclude_algorithms", "[BlurPool]"}},
            "config");
  const TrainerOptions read = read_options(h, TrainerOptions(nullptr));
  EXPECT_EQ(read.save().folder(), "runs/{run_name}");
  EXPECT_EQ(read.save().save_interval(), Time::from_epoch(2));
  EXPECT_EQ(read.eval().subset_num_batches(), 1);
  EXPECT_EQ(read.load().exclude_algorithms(), std::vector<std::string>{"BlurPool"});
  Hparams inner({{"folder", "x"}}, "config");  // the sub-struct's own name is not a Trainer key
  EXPECT_THROW(read_options(inner, TrainerOptions(nullptr)), std::invalid_argument);
}

TEST(TrainerTest, ClosedTrainerRejectsWork) {
  Trainer trainer(testing::quiet_options(testing::make_classifier())
                      .train_dataloader(testing::make_loader(testing::make_blobs(16), 8))
                      .max_duration("1ba"));
  trainer.close();
  EXPECT_THROW(trainer.fit(), std::logic_error);
}

TEST(TrainerTest, CachesLargeCpuBlocksAndGivesThemBackWhenClosed) {
  Trainer trainer(testing::quiet_options(testing::make_classifier())
                      .train_dataloader(testing::make_loader(testing::make_blobs(16), 8))
                      .max_duration("1ba"));
  auto allocate_and_free = [] { at::Tensor big = at::empty({int64_t{80} << 18}, at::kFloat); };  // 80 MiB
  allocate_and_free();  // while the model is built and loaded: nothing is kept
  EXPECT_EQ(cpu_block_cache_stats().cached_bytes, 0);
  trainer.fit();  // tune_allocator is on by default: the Trainer holds the cache from here
  ASSERT_TRUE(cpu_block_cache_installed());
  allocate_and_free();
  EXPECT_EQ(cpu_block_cache_stats().cached_bytes, int64_t{80} << 20);
  trainer.close();
  EXPECT_EQ(cpu_block_cache_stats().cached_bytes, 0);
}

TEST(ThresholdStopperTest, StopsWhenEvalMetricCrossesThreshold) {
  auto recorder = std::make_shared<testing::RecordingCallback>();
  Trainer trainer(testing::quiet_options(testing::make_classifier(8, 32, 4))
                      .train_dataloader(testing::make_loader(testing::make_blobs(256), 32))
                      .eval_dataloader(testing::make_loader(testing::make_blobs(256), 256, false))
                      .eval_interval("2ba")
                      .max_duration("50ep")
                      .callbacks({std::make_shared<ThresholdStopper>("Accuracy", "eval", 0.6), recorder}));
  trainer.fit();
  const State& s = trainer.state();
  EXPECT_GE(s.eval_metric_values.at("Accuracy"), 0.6);
  EXPECT_LT(s.timestamp.batch, 50 * 8);
  EXPECT_EQ(s.timestamp.batch % 2, 0);  // stopped right after an evaluation
  EXPECT_EQ(*s.max_duration, Time(s.timestamp.batch, TimeUnit::BATCH));
}

// Composer's default comparison is "greater" unless the name contains loss, error or perplexity; "CrossEntropy" does
// not, so minimising it needs an explicit comparison.
TEST(ThresholdStopperTest, ExplicitComparisonForMetricsToMinimise) {
  Trainer trainer(testing::quiet_options(testing::make_classifier(8, 32, 4))
                      .train_dataloader(testing::make_loader(testing::make_blobs(256), 32))
                      .eval_dataloader(testing::make_loader(testing::make_blobs(256), 256, false))
                      .max_duration("50ep")
                      .callbacks({std::make_shared<ThresholdStopper>("CrossEntropy", "eval", 1.0,
                                                                     [](double v, double t) { return v <= t; })}));
  trainer.fit();
  EXPECT_LE(trainer.state().eval_metric_values.at("CrossEntropy"), 1.0);
  EXPECT_LT(trainer.state().timestamp.epoch, 50);
}

TEST(TrainerTest, DecoupledAdamWTrainsTheModel) {
  auto mem = std::make_shared<InMemoryLogger>();
  auto model = testing::make_classifier(8, 32, 4);
  auto opt = std::make_shared<optim::DecoupledAdamW>(model->parameters(), optim::DecoupledAdamWOptions(1e-2));
  Trainer trainer(testing::quiet_options(model)
                      .train_dataloader(testing::make_loader(testing::make_blobs(256), 32))
                      .eval_dataloader(testing::make_loader(testing::make_blobs(256), 64, false))
                      .optimizer(opt)
                      .max_duration("8ep")
                      .schedulers({std::make_shared<CosineAnnealingWithWarmupScheduler>(Time(4, TimeUnit::BATCH))})
                      .loggers({mem}));
  trainer.fit();
  EXPECT_GT(mem->most_recent_values.at("metrics/eval/Accuracy"), 0.8);
}

// Composer's iterations: iteration_length epochs (or tokens) per iteration; max_duration in iter then ends.
TEST(TrainerTest, IterationsOfTwoEpochsEndAMaxDurationInIter) {
  auto recorder = std::make_shared<testing::RecordingCallback>();
  Trainer trainer(testing::quiet_options(testing::make_classifier())
                      .train_dataloader(testing::make_loader(testing::make_blobs(32), 8))
                      .max_duration("2iter")
                      .iteration_length(Time::from_string("2ep"))
                      .callbacks({recorder}));
  trainer.fit();
  const Timestamp& ts = trainer.state().timestamp;
  EXPECT_EQ(ts.iteration, 2);
  EXPECT_EQ(ts.epoch, 4);
  EXPECT_EQ(ts.batch, 16);
  EXPECT_EQ(ts.epoch_in_iteration, 0);
  const auto count = [&](Event e) { return std::count(recorder->events.begin(), recorder->events.end(), e); };
  EXPECT_EQ(count(Event::ITERATION_START), 2);
  EXPECT_EQ(count(Event::ITERATION_END), 2);
  EXPECT_EQ(count(Event::ITERATION_CHECKPOINT), 2);
  // ITERATION_END follows the second EPOCH_CHECKPOINT of its iteration, then ITERATION_CHECKPOINT.
  const auto first_end = std::find(recorder->events.begin(), recorder->events.end(), Event::ITERATION_END);
  ASSERT_NE(first_end, recorder->events.end());
  EXPECT_EQ(*(first_end - 1), Event::EPOCH_CHECKPOINT);
  EXPECT_EQ(*(first_end + 1), Event::ITERATION_CHECKPOINT);
  EXPECT_EQ(std::count(recorder->events.begin(), first_end, Event::EPOCH_END), 2);
}

TEST(TrainerTest, MaxDurationInIterWithoutIterationLengthIsAnError) {
  try {
    Trainer trainer(testing::quiet_options(testing::make_classifier())
                        .train_dataloader(testing::make_loader(testing::make_blobs(32), 8))
                        .max_duration("2iter"));
    ADD_FAILURE() << "accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("iteration_length"), std::string::npos) << e.what();
  }
  EXPECT_THROW(testing::quiet_options(testing::make_classifier()).iteration_length(Time::from_string("5ba")).validate(),
               std::invalid_argument);
}

// decoupled_sgdw / decoupled_adamw created with lr 0 and a weight decay: Composer's decay factor is 1 then (the
// weights shrink by 1 - weight_decay per step), not lr / initial_lr = 0 / 0.
TEST(TrainerTest, DecoupledOptimizersWithZeroLrDecayAsComposer) {
  for (int adam = 0; adam < 2; ++adam) {
    auto model = testing::make_classifier();
    std::vector<at::Tensor> before;
    for (const auto& p : model->parameters()) before.push_back(p.detach().clone());
    std::shared_ptr<torch::optim::Optimizer> opt;
    if (adam) {
      opt = std::make_shared<optim::DecoupledAdamW>(model->parameters(),
                                                    optim::DecoupledAdamWOptions(0.0).weight_decay(0.01));
    } else {
      opt = std::make_shared<optim::DecoupledSGDW>(model->parameters(),
                                                   optim::DecoupledSGDWOptions(0.0).weight_decay(0.01));
    }
    Trainer trainer(testing::quiet_options(model)
                        .train_dataloader(testing::make_loader(testing::make_blobs(32), 8))
                        .optimizer(opt)
                        .max_duration("2ba"));
    trainer.fit();
    EXPECT_FALSE(trainer.state().nonfinite_loss_batch.has_value());
    const auto params = model->parameters();
    for (size_t i = 0; i < params.size(); ++i) {
      ASSERT_TRUE(torch::isfinite(params[i]).all().item<bool>()) << (adam ? "DecoupledAdamW" : "DecoupledSGDW");
      EXPECT_TRUE(torch::allclose(params[i], before[i] * 0.99 * 0.99, 1e-6, 1e-7))
          << (adam ? "DecoupledAdamW" : "DecoupledSGDW");
    }
  }
}

TEST(TrainerTest, ANonFiniteLossIsRecorded) {
  auto model = testing::make_classifier();
  auto opt = std::make_shared<optim::DecoupledSGDW>(model->parameters(), optim::DecoupledSGDWOptions(1e30));
  Trainer trainer(testing::quiet_options(model)
                      .train_dataloader(testing::make_loader(testing::make_blobs(64), 8))
                      .optimizer(opt)
                      .max_duration("6ba"));
  trainer.fit();
  ASSERT_TRUE(trainer.state().nonfinite_loss_batch.has_value());
  EXPECT_GE(*trainer.state().nonfinite_loss_batch, 2);
  EXPECT_LE(*trainer.state().nonfinite_loss_batch, 6);
}

// The C++ API's documented order: seed_all(seed), build the model, then the Trainer with the same seed.
TEST(TrainerTest, SameSeedGivesBitwiseEqualRuns) {
  auto run = [] {
    seed_all(123);
    auto model = ComposerClassifier::wrap(
        torch::nn::Sequential(torch::nn::Linear(8, 16), torch::nn::ReLU(), torch::nn::Linear(16, 4)));
    Trainer trainer(TrainerOptions(model)
                        .progress_bar(false)
                        .device("cpu")
                        .seed(123)
                        .train_dataloader(testing::make_loader(testing::make_blobs(64), 8))
                        .max_duration("1ep"));
    trainer.fit();
    return model->parameters();
  };
  const auto a = run(), b = run();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i], b[i])) << "parameter " << i;
}

TEST(ThresholdStopperTest, ComposersMetricNameIsAnAliasAndAMissingMetricIsAnError) {
  Trainer trainer(testing::quiet_options(testing::make_classifier(8, 32, 4))
                      .train_dataloader(testing::make_loader(testing::make_blobs(256), 32))
                      .eval_dataloader(testing::make_loader(testing::make_blobs(256), 256, false))
                      .eval_interval("2ba")
                      .max_duration("50ep")
                      .callbacks({std::make_shared<ThresholdStopper>("MulticlassAccuracy", "eval", 0.6)}));
  trainer.fit();
  EXPECT_LT(trainer.state().timestamp.batch, 50 * 8);
  Trainer typo(testing::quiet_options(testing::make_classifier(8, 32, 4))
                   .train_dataloader(testing::make_loader(testing::make_blobs(64), 32))
                   .eval_dataloader(testing::make_loader(testing::make_blobs(64), 64, false))
                   .eval_interval("1ba")
                   .max_duration("2ba")
                   .callbacks({std::make_shared<ThresholdStopper>("Acuracy", "eval", 0.6)}));
  try {
    typo.fit();
    ADD_FAILURE() << "a misspelt monitor was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(
        std::string(e.what()).find("no metric 'Acuracy' for dataloader label 'eval'; the metrics there are: Accuracy"),
        std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace composer
