// EarlyStopper, NaNMonitor, FreeOutputs and RuntimeEstimator in real Trainer runs (Composer's own EarlyStopper decides
// the same stops: tests/peer/semantics_test.cpp).
#include "support/errors.h"
#include "support/python.h"
#include "support/run_files.h"
#include "support/test_support.h"

#include <gtest/gtest.h>

#include <limits>

namespace composer {
namespace {

// Nothing improves by more than min_delta 1.0, so the best stays the first evaluation's (batch 1) and the run stops
// once more than 2 batches have passed since: at batch 4.
TEST(EarlyStopperTest, StopsOncePatienceBatchesPassWithoutImprovement) {
  Trainer trainer(testing::quiet_options(testing::make_classifier(8, 32, 4))
                      .train_dataloader(testing::make_loader(testing::make_blobs(256), 32))
                      .eval_dataloader(testing::make_loader(testing::make_blobs(64), 64, false))
                      .eval_interval("1ba")
                      .max_duration("5ep")
                      .callbacks({std::make_shared<EarlyStopper>(EarlyStopperOptions()
                                                                     .monitor("Accuracy")
                                                                     .dataloader_label("eval")
                                                                     .min_delta(1.0)
                                                                     .patience(Time::from_batch(2)))}));
  trainer.fit();
  EXPECT_EQ(trainer.state().timestamp.batch, 4);
  EXPECT_EQ(*trainer.state().max_duration, Time::from_batch(4));
}

// On the train metrics with a patience in epochs: the best is the first epoch's, and the run stops at the end of the
// first epoch more than 1 epoch after it (epoch 3 of 10), in batches as Composer's stop_training.
TEST(EarlyStopperTest, TrainMetricPatienceInEpochs) {
  auto stopper = std::make_shared<EarlyStopper>(
      EarlyStopperOptions().monitor("Accuracy").dataloader_label("train").min_delta(1.0).patience(Time::from_epoch(1)));
  Trainer trainer(testing::quiet_options(testing::make_classifier(8, 32, 4))
                      .train_dataloader(testing::make_loader(testing::make_blobs(256), 32))
                      .max_duration("10ep")
                      .callbacks({stopper}));
  trainer.fit();
  EXPECT_EQ(trainer.state().timestamp.epoch, 3);
  EXPECT_EQ(*trainer.state().max_duration, Time::from_batch(24));
  ASSERT_TRUE(stopper->best().has_value());
  EXPECT_GT(*stopper->best(), 0.25);  // the first epoch's training accuracy, above chance on 4 classes
}

TEST(EarlyStopperTest, BadOptionsAndAMissingMetricAreClearErrors) {
  auto opts = [] { return EarlyStopperOptions().monitor("Accuracy").dataloader_label("eval"); };
  testing::expect_error_containing([&] { EarlyStopper(EarlyStopperOptions().dataloader_label("eval")); },
                                   "EarlyStopper: monitor is required");
  testing::expect_error_containing([&] { EarlyStopper(opts().comp("bigger")); },
                                   "EarlyStopper.comp 'bigger' must be one of 'greater', 'gt', 'less', 'lt'");
  testing::expect_error_containing([&] { EarlyStopper(opts().patience(Time::from_duration(0.5))); },
                                   "EarlyStopper.patience must be in epochs or batches");
  Hparams h({{"monitor", "Accuracy"}, {"dataloader_label", "eval"}, {"patience", "2"}}, "early_stopper");
  EXPECT_EQ(read_options(h, EarlyStopperOptions()).patience(), Time::from_epoch(2));  // a bare integer is epochs
  Trainer typo(testing::quiet_options(testing::make_classifier(8, 32, 4))
                   .train_dataloader(testing::make_loader(testing::make_blobs(64), 32))
                   .eval_dataloader(testing::make_loader(testing::make_blobs(64), 64, false))
                   .eval_interval("1ba")
                   .max_duration("2ba")
                   .callbacks({std::make_shared<EarlyStopper>(
                       EarlyStopperOptions().monitor("Acuracy").dataloader_label("eval"))}));
  testing::expect_error_containing([&] { typo.fit(); },
                                   "EarlyStopper: no metric 'Acuracy' for dataloader label 'eval'; the metrics there "
                                   "are: Accuracy");
}

// A NaN in the third batch's inputs makes its loss NaN: the run stops there with an error naming the batch.
TEST(NaNMonitorTest, ANaNLossStopsTheRunNamingTheBatch) {
  Batch data = testing::make_blobs(64);
  data.input()[20][3] = std::numeric_limits<float>::quiet_NaN();  // batch 3 of 8 samples
  Trainer trainer(testing::quiet_options(testing::make_classifier())
                      .train_dataloader(testing::make_loader(data, 8, /*shuffle=*/false))
                      .max_duration("1ep")
                      .callbacks({std::make_shared<NaNMonitor>()}));
  try {
    trainer.fit();
    ADD_FAILURE() << "a NaN loss was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "NaNMonitor: the training loss contains a NaN (batch 3)");
  }
  EXPECT_EQ(trainer.state().timestamp.batch, 2);
}

TEST(NaNMonitorTest, FiniteLossesPass) {
  Trainer trainer(testing::quiet_options(testing::make_classifier())
                      .train_dataloader(testing::make_loader(testing::make_blobs(64), 8))
                      .max_duration("1ep")
                      .callbacks({std::make_shared<NaNMonitor>()}));
  trainer.fit();
  EXPECT_EQ(trainer.state().timestamp.batch, 8);
}

class EvalMetricsOnly : public ComposerClassifier {
 public:
  using ComposerClassifier::ComposerClassifier;
  MetricMap get_metrics(bool is_train) override {
    return is_train ? MetricMap{} : ComposerClassifier::get_metrics(false);
  }
};

class OutputsProbe : public Callback {
 public:
  void after_forward(State& state, Logger&) override { forward_numel = state.outputs.numel(); }
  void after_backward(State& state, Logger&) override { backward_numel = state.outputs.numel(); }
  int64_t forward_numel = -1, backward_numel = -1;
};

TEST(FreeOutputsTest, OutputsAreEmptyAfterTheLoss) {
  auto mlp = testing::make_mlp(8, 16, 4);
  auto model =
      std::make_shared<EvalMetricsOnly>(mlp.ptr(), [mlp](const at::Tensor& x) mutable { return mlp->forward(x); });
  auto probe = std::make_shared<OutputsProbe>();
  Trainer trainer(testing::quiet_options(model)
                      .train_dataloader(testing::make_loader(testing::make_blobs(64), 8))
                      .eval_dataloader(testing::make_loader(testing::make_blobs(32), 32, false))
                      .max_duration("2ba")
                      .callbacks({std::make_shared<FreeOutputs>(), probe}));
  trainer.fit();
  EXPECT_EQ(probe->forward_numel, 8 * 4);
  EXPECT_EQ(probe->backward_numel, 0);
  EXPECT_TRUE(trainer.state().eval_metric_values.count("Accuracy"));  // evaluation is unaffected
}

TEST(FreeOutputsTest, RefusesAModelWithTrainingMetrics) {
  Trainer trainer(testing::quiet_options(testing::make_classifier())
                      .train_dataloader(testing::make_loader(testing::make_blobs(64), 8))
                      .max_duration("1ba")
                      .callbacks({std::make_shared<FreeOutputs>()}));
  testing::expect_error_containing([&] { trainer.fit(); },
                                   "FreeOutputs frees the outputs that training metrics are computed from, and the "
                                   "model has training metrics (Accuracy)");
  EXPECT_EQ(trainer.state().timestamp.batch, 0);
}

// 4 epochs of 8 batches, the first skipped: an estimate at every later batch, positive until the last, which has no
// training left (and no evaluator to wait for).
TEST(RuntimeEstimatorTest, EstimatesEveryBatchAfterTheSkippedOnesAndEndsAtZero) {
  auto mem = std::make_shared<InMemoryLogger>();
  Trainer trainer(testing::quiet_options(testing::make_classifier())
                      .train_dataloader(testing::make_loader(testing::make_blobs(64), 8))
                      .max_duration("4ep")
                      .loggers({mem})
                      .callbacks({std::make_shared<RuntimeEstimator>(RuntimeEstimatorOptions().time_unit("seconds"))}));
  trainer.fit();
  EXPECT_EQ(mem->hyperparameters.at("time/remaining_estimate_unit"), "seconds");
  const auto estimates = mem->values("time/remaining_estimate");
  ASSERT_EQ(estimates.size(), 31u);
  for (size_t i = 0; i + 1 < estimates.size(); ++i) EXPECT_GT(estimates[i], 0.0) << "batch " << i + 2;
  EXPECT_EQ(estimates.back(), 0.0);
}

TEST(RuntimeEstimatorTest, BadOptionsAreClearErrors) {
  testing::expect_error_containing([] { RuntimeEstimator(RuntimeEstimatorOptions().time_unit("weeks")); },
                                   "RuntimeEstimator.time_unit 'weeks' must be one of seconds, minutes, hours, days");
  testing::expect_error_containing([] { RuntimeEstimator(RuntimeEstimatorOptions().skip_batches(-1)); },
                                   "RuntimeEstimator.skip_batches must be >= 0, got -1");
}

}  // namespace
}  // namespace composer

namespace composer {
namespace {

/// At BATCH_END, before OptimizerMonitor: the L2 norm of every parameter's gradient.
class GradNormProbe : public Callback {
 public:
  void batch_end(State& state, Logger&) override {
    auto& norms = by_batch[state.timestamp.batch];
    for (const auto& item : state.model->named_parameters())
      if (item.value().grad().defined()) norms[item.key()] = item.value().grad().norm().item<double>();
  }
  std::map<int64_t, std::map<std::string, double>> by_batch;
};

TEST(OptimizerMonitorTest, GradientNormsPerParameterAndGlobalEveryInterval) {
  auto mem = std::make_shared<InMemoryLogger>();
  auto probe = std::make_shared<GradNormProbe>();
  auto model = testing::make_classifier();
  Trainer trainer(
      testing::quiet_options(model)
          .train_dataloader(testing::make_loader(testing::make_blobs(32), 8))
          .max_duration("4ba")
          .callbacks({probe, std::make_shared<OptimizerMonitor>(OptimizerMonitorOptions().batch_log_interval(2))})
          .loggers({mem}));
  trainer.fit();
  const std::vector<std::string> names = {"module.0.weight", "module.0.bias", "module.2.weight", "module.2.bias"};
  const auto global = mem->data.at("l2_norm/grad/global");
  ASSERT_EQ(global.size(), 2u);  // batches 2 and 4
  for (size_t i = 0; i < global.size(); ++i) {
    const int64_t batch = global[i].first.batch;
    EXPECT_EQ(batch, int64_t(2 * (i + 1)));
    double squares = 0;
    for (const auto& name : names) {
      const double expected = probe->by_batch.at(batch).at(name);
      EXPECT_NEAR(mem->data.at("l2_norm/grad/" + name).at(i).second, expected, 1e-6) << name;
      squares += expected * expected;
    }
    EXPECT_NEAR(global[i].second, std::sqrt(squares), 1e-6);
  }
  EXPECT_EQ(mem->data.count("l2_norm/moment/module.0.weight"), 0u);  // the default optimizer reports nothing more
}

TEST(OptimizerMonitorTest, DecoupledAdamWAddsItsNormsUnlessTurnedOff) {
  for (bool optimizer_metrics : {true, false}) {
    auto mem = std::make_shared<InMemoryLogger>();
    auto model = testing::make_classifier();
    Trainer trainer(testing::quiet_options(model)
                        .train_dataloader(testing::make_loader(testing::make_blobs(16), 8))
                        .max_duration("1ba")
                        .optimizer(std::make_shared<optim::DecoupledAdamW>(model->parameters()))
                        .callbacks({std::make_shared<OptimizerMonitor>(
                            OptimizerMonitorOptions().batch_log_interval(1).log_optimizer_metrics(optimizer_metrics))})
                        .loggers({mem}));
    trainer.fit();
    for (const std::string metric : {"moment", "param", "update"})
      EXPECT_EQ(mem->data.count("l2_norm/" + metric + "/module.0.weight"), optimizer_metrics ? 1u : 0u) << metric;
    if (optimizer_metrics) {
      EXPECT_NEAR(mem->most_recent_values.at("l2_norm/param/module.0.weight"),
                  model->named_parameters()["module.0.weight"].norm().item<double>(), 1e-6);
    }
  }
  EXPECT_THROW(OptimizerMonitor(OptimizerMonitorOptions().batch_log_interval(0)), std::invalid_argument);
}

TEST(MemoryMonitorTest, ProcessMemoryOnCpuEveryBatchWithRankAggregates) {
  auto mem = std::make_shared<InMemoryLogger>();
  Trainer trainer(
      testing::quiet_options(testing::make_classifier())
          .train_dataloader(testing::make_loader(testing::make_blobs(32), 8))
          .max_duration("4ba")
          .callbacks({std::make_shared<MemoryMonitor>(MemoryMonitorOptions().dist_aggregate_batch_interval(2))})
          .loggers({mem}));
  trainer.fit();
  const auto current = mem->data.at("memory/current_rss_mem");
  const auto peak = mem->data.at("memory/peak_rss_mem");
  ASSERT_EQ(current.size(), 4u);
  for (size_t i = 0; i < current.size(); ++i) {
    EXPECT_GT(current[i].second, 0.001) << "at least a megabyte";  // gigabytes
    EXPECT_LT(current[i].second, 24.0);
    EXPECT_GE(peak[i].second, current[i].second);
  }
  // One process: the average, minimum and maximum over the ranks are the value itself. As in Composer, the check
  // reads the batch count at AFTER_TRAIN_BATCH, before it moves on: counts 0 and 2 (the first and third batches).
  const auto avg = mem->data.at("memory/current_rss_mem_avg");
  ASSERT_EQ(avg.size(), 2u);
  EXPECT_EQ(avg[0].first.batch, 0);
  EXPECT_EQ(avg[1].first.batch, 2);
  EXPECT_EQ(avg[1].second, current[2].second);
  EXPECT_EQ(mem->data.at("memory/peak_rss_mem_max").at(1).second, peak[2].second);
  EXPECT_EQ(mem->data.at("memory/peak_rss_mem_min").at(0).second, peak[0].second);
}

TEST(MemoryMonitorTest, ComposersRoundingAndBadOptions) {
  EXPECT_DOUBLE_EQ(bytes_to_rounded_gigabytes(123456789.0), 0.12346);
  EXPECT_DOUBLE_EQ(bytes_to_rounded_gigabytes(1.5e9), 1.5);
  EXPECT_DOUBLE_EQ(bytes_to_rounded_gigabytes(98765432101.0), 98.765);
  EXPECT_EQ(bytes_to_rounded_gigabytes(0), 0.0);
  EXPECT_THROW(MemoryMonitor(MemoryMonitorOptions().dist_aggregate_batch_interval(0)), std::invalid_argument);
  EXPECT_TRUE(MemoryMonitor().report(c10::Device(c10::kCPU)).count("peak_rss_mem"));
}

}  // namespace
}  // namespace composer

namespace composer {
namespace {

TEST(SystemMetricsMonitorTest, EveryTrainAndEvalBatchWithPsutilsKeys) {
  auto mem = std::make_shared<InMemoryLogger>();
  Trainer trainer(testing::quiet_options(testing::make_classifier())
                      .train_dataloader(testing::make_loader(testing::make_blobs(24), 8))
                      .eval_dataloader(testing::make_loader(testing::make_blobs(16), 8, false))
                      .max_duration("3ba")
                      .eval_interval("3ba")
                      .callbacks({std::make_shared<SystemMetricsMonitor>()})
                      .loggers({mem}));
  trainer.fit();
  // 3 training batches, then 2 evaluation batches (an evaluation at batch 3 and at the end are the same one).
  EXPECT_GE(mem->data.at("cpu_percentage").size(), 5u);
  for (const std::string key :
       {"cpu_memory_total",   "cpu_memory_available", "cpu_memory_percent",   "cpu_memory_used",
        "cpu_memory_free",    "cpu_memory_active",    "cpu_memory_inactive",  "cpu_memory_buffers",
        "cpu_memory_cached",  "cpu_memory_shared",    "cpu_memory_slab",      "disk_memory_total",
        "disk_memory_used",   "disk_memory_free",     "disk_memory_percent",  "network_bytes_sent",
        "network_bytes_recv", "network_packets_sent", "network_packets_recv", "network_errin",
        "network_errout",     "network_dropin",       "network_dropout"})
    EXPECT_EQ(mem->data.count(key), 1u) << key;
  EXPECT_EQ(mem->data.at("cpu_percentage").front().second, 0.0);  // psutil's first reading has no interval
  for (const auto& [ts, v] : mem->data.at("cpu_percentage")) EXPECT_TRUE(v >= 0 && v <= 100) << v;
}

// The same machine read by psutil (what Composer's SystemMetricsMonitor calls) a moment later.
TEST(SystemMetricsMonitorTest, AgreesWithPsutil) {
  COMPOSER_REQUIRE_PYTHON("psutil");
  SystemMetricsMonitor monitor;
  const auto ours = monitor.compute_system_metrics();
  const auto py =
      testing::run_python({"-c",
                           "import json, os, psutil\n"
                           "m = {f'cpu_memory_{k}': v for k, v in psutil.virtual_memory()._asdict().items()}\n"
                           "m.update({f'disk_memory_{k}': v for k, v in psutil.disk_usage(os.sep)._asdict().items()})\n"
                           "m.update({f'network_{k}': v for k, v in psutil.net_io_counters()._asdict().items()})\n"
                           "print(json.dumps(m))"});
  ASSERT_EQ(py.status, 0) << py.output;
  const auto theirs = nlohmann::json::parse(py.output.substr(py.output.rfind('{')));
  ASSERT_EQ(theirs.size() + 1, ours.size()) << theirs.dump();  // and cpu_percentage
  for (const auto& [key, value] : theirs.items()) ASSERT_TRUE(ours.count(key)) << key;
  EXPECT_EQ(ours.at("cpu_memory_total"), theirs["cpu_memory_total"].get<double>());
  EXPECT_EQ(ours.at("disk_memory_total"), theirs["disk_memory_total"].get<double>());
  const auto close = [&](const std::string& key, double tolerance) {
    EXPECT_NEAR(ours.at(key), theirs[key].get<double>(), tolerance) << key;
  };
  close("cpu_memory_available", 0.05 * ours.at("cpu_memory_total"));  // Python's start moves memory a little
  close("cpu_memory_percent", 5.0);
  close("disk_memory_used", 0.01 * ours.at("disk_memory_total"));
  close("disk_memory_percent", 1.0);
  EXPECT_LE(ours.at("network_bytes_recv"), theirs["network_bytes_recv"].get<double>());
  close("network_bytes_recv", 1e8);
  close("network_packets_sent", 1e5);
}

}  // namespace
}  // namespace composer

namespace composer {
namespace {

/// A classifier that reports 1e6 flops per batch.
class CountedFlops : public ComposerClassifier {
 public:
  using ComposerClassifier::ComposerClassifier;
  std::optional<double> flops_per_batch(const Batch&) override { return 1e6; }
};

TEST(SpeedMonitorTest, ModelFlopsUtilizationFromTheGivenPeak) {
  auto mlp = testing::make_mlp(8, 16, 4);
  auto model =
      std::make_shared<CountedFlops>(mlp.ptr(), [mlp](const at::Tensor& x) mutable { return mlp->forward(x); });
  auto mem = std::make_shared<InMemoryLogger>();
  Trainer trainer(
      testing::quiet_options(model)
          .train_dataloader(testing::make_loader(testing::make_blobs(48), 8))
          .max_duration("6ba")
          .callbacks({std::make_shared<SpeedMonitor>(SpeedMonitorOptions().window_size(2).gpu_flops_available(4e9))})
          .loggers({mem}));
  trainer.fit();
  const auto mfu = mem->data.at("throughput/device/mfu");
  const auto flops = mem->data.at("throughput/device/flops_per_sec");
  const auto batches = mem->data.at("throughput/batches_per_sec");
  ASSERT_EQ(mfu.size(), 4u);  // batches 3-6: once the window of 2 is full
  for (size_t i = 0; i < mfu.size(); ++i) {
    EXPECT_DOUBLE_EQ(mfu[i].second, flops[i].second / 4e9);
    EXPECT_NEAR(flops[i].second, 1e6 * batches[i].second, 1e-6 * flops[i].second);
  }
  // No peak given on CPU: no MFU (Composer's table covers CUDA devices only).
  auto quiet = std::make_shared<InMemoryLogger>();
  Trainer cpu(testing::quiet_options(model)
                  .train_dataloader(testing::make_loader(testing::make_blobs(48), 8))
                  .max_duration("4ba")
                  .callbacks({std::make_shared<SpeedMonitor>(SpeedMonitorOptions().window_size(2))})
                  .loggers({quiet}));
  cpu.fit();
  EXPECT_EQ(quiet->data.count("throughput/device/mfu"), 0u);
  EXPECT_EQ(quiet->data.count("throughput/device/flops_per_sec"), 1u);
  EXPECT_THROW(SpeedMonitor(SpeedMonitorOptions().gpu_flops_available(0.0)), std::invalid_argument);
  EXPECT_EQ(gpu_flops_available("NVIDIA H200", Precision::AMP_BF16), 989500000000000.0);
}

}  // namespace
}  // namespace composer

namespace composer {
namespace {

std::string only_checkpoint(const std::filesystem::path& dir) {
  std::string found;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.is_regular_file() && !e.is_symlink() && e.path().extension() == ".pt") found = e.path().string();
  return found;
}

TEST(LoadCheckpointTest, LoadsTheWeightsAtItsEvent) {
  const auto dir = testing::fresh_dir("load_checkpoint_cb");
  auto trained = testing::make_classifier(8, 16, 4, /*seed=*/1);
  {
    Trainer t(testing::quiet_options(trained)
                  .train_dataloader(testing::make_loader(testing::make_blobs(32), 8))
                  .max_duration("2ba")
                  .save_folder(dir.string())
                  .save_interval("2ba"));
    t.fit();
  }
  const std::string path = only_checkpoint(dir);
  ASSERT_FALSE(path.empty());
  const auto weights = [](const std::shared_ptr<ComposerModel>& m) { return m->named_parameters()["module.0.weight"]; };

  for (const Event event : {Event::BEFORE_LOAD, Event::FIT_START}) {
    auto fresh = testing::make_classifier(8, 16, 4, /*seed=*/2);
    ASSERT_FALSE(at::equal(weights(fresh), weights(trained)));
    Trainer t(testing::quiet_options(fresh)
                  .train_dataloader(testing::make_loader(testing::make_blobs(32), 8))
                  .max_duration("3ba")
                  .callbacks({std::make_shared<LoadCheckpoint>(
                      LoadCheckpointOptions().load_path(path).load_weights_only(true).event(event))}));
    EXPECT_EQ(at::equal(weights(fresh), weights(trained)), event == Event::BEFORE_LOAD) << event_name(event);
    t.fit();                                  // at FIT_START the weights arrive before the first step
    EXPECT_EQ(t.state().timestamp.batch, 3);  // weights only: the run's own progress
  }
  // The whole state: the timestamp comes with it.
  auto fresh = testing::make_classifier(8, 16, 4, /*seed=*/2);
  Trainer t(testing::quiet_options(fresh)
                .train_dataloader(testing::make_loader(testing::make_blobs(32), 8))
                .max_duration("3ba")
                .callbacks({std::make_shared<LoadCheckpoint>(LoadCheckpointOptions().load_path(path))}));
  EXPECT_EQ(t.state().timestamp.batch, 2);
  EXPECT_TRUE(at::equal(weights(fresh), weights(trained)));
  std::filesystem::remove_all(dir);
}

// LoadCheckpoint takes what load_path takes: an object-store URI (downloaded first), formatted as Composer formats it
// ({run_name}; {rank} as rank 0's).
TEST(LoadCheckpointTest, TakesUrisAndFormatsAsComposer) {
  const auto dir = testing::fresh_dir("load_checkpoint_uri");
  {
    Trainer t(testing::quiet_options(testing::make_classifier(8, 16, 4, /*seed=*/1))
                  .train_dataloader(testing::make_loader(testing::make_blobs(32), 8))
                  .max_duration("2ba")
                  .run_name("uri")
                  .save_folder((dir / "{run_name}").string())
                  .save_interval("2ba"));
    t.fit();
  }
  ASSERT_TRUE(std::filesystem::exists(dir / "uri" / "ep0-ba2-rank0.pt"));
  Trainer t(testing::quiet_options(testing::make_classifier(8, 16, 4, /*seed=*/2))
                .train_dataloader(testing::make_loader(testing::make_blobs(32), 8))
                .max_duration("3ba")
                .run_name("uri")
                .callbacks({std::make_shared<LoadCheckpoint>(LoadCheckpointOptions().load_path(
                    "file://" + dir.string() + "/{run_name}/ep0-ba2-rank{rank}.pt"))}));
  EXPECT_EQ(t.state().timestamp.batch, 2);
  EXPECT_EQ(format_load_path("a/{run_name}/{{x}}-{local_rank}-{node_rank}.pt", "r"), "a/r/{x}-0-0.pt");
  std::filesystem::remove_all(dir);
}

TEST(LoadCheckpointTest, BadPathsAreClearErrors) {
  EXPECT_THROW(LoadCheckpoint{LoadCheckpointOptions()}, std::invalid_argument);
  EXPECT_THROW(LoadCheckpoint{LoadCheckpointOptions().load_path("")}, std::invalid_argument);
  EXPECT_NE(testing::any_error_of([] {
              LoadCheckpoint{LoadCheckpointOptions().load_path("ckpt/ep{epoch}.pt")};
            }).find("load_path 'ckpt/ep{epoch}.pt': {epoch} cannot be filled when loading"),
            std::string::npos);
  EXPECT_NE(testing::any_error_of([] {
              LoadCheckpoint{LoadCheckpointOptions().load_path("s3:/bucket/x.pt")};
            }).find("s3:/bucket/x.pt"),
            std::string::npos);
  const auto dir = testing::fresh_dir("load_checkpoint_bad");
  const std::string missing = (dir / "nope.pt").string();
  try {
    Trainer t(testing::quiet_options(testing::make_classifier())
                  .train_dataloader(testing::make_loader(testing::make_blobs(16), 8))
                  .max_duration("1ba")
                  .callbacks({std::make_shared<LoadCheckpoint>(LoadCheckpointOptions().load_path(missing))}));
    FAIL() << "expected a CheckpointError";
  } catch (const CheckpointError& e) {
    EXPECT_EQ(std::string(e.what()), "checkpoint '" + missing + "' cannot be opened: No such file or directory");
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace composer
