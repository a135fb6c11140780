// EarlyStopper, NaNMonitor, FreeOutputs and RuntimeEstimator in real Trainer runs (Composer's own EarlyStopper decides
// the same stops: tests/peer/semantics_test.cpp).
#include "support/errors.h"
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
