// Each loop unit on its own: built from a hand-assembled State, Engine and Logger (no Trainer), the events it
// fires, what it computes, and the strategy calls it makes.
#include "support/test_support.h"
#include "trainer/detail/cpu_eval_chunks.h"

#include <gtest/gtest.h>

namespace composer {
namespace {

using testing::names;

// A State, Logger and Engine as a hand-written loop would build them.
struct Rig {
  explicit Rig(std::shared_ptr<ComposerModel> model, double lr = 0.1) : logger(state), engine(state, logger) {
    state.model = std::move(model);
    state.optimizer =
        std::make_shared<optim::DecoupledSGDW>(state.model->parameters(), optim::DecoupledSGDWOptions(lr));
    state.callbacks.push_back(recorder);
    state.callbacks.push_back(memory);
    logger.add_destination(memory);
    // Composer's Engine requires a loader and a duration for training events; a hand-written loop sets them too.
    state.set_dataloader(loader.get(), "train");
    state.max_duration = Time::from_epoch(1);
  }
  ~Rig() { engine.close(); }
  State state;
  Logger logger;
  Engine engine;
  std::shared_ptr<testing::RecordingCallback> recorder = std::make_shared<testing::RecordingCallback>();
  std::shared_ptr<InMemoryLogger> memory = std::make_shared<InMemoryLogger>();
  std::shared_ptr<TensorDataLoader> loader = testing::make_loader(testing::make_blobs(8), 4);
};

std::vector<std::string> step_events(int microbatches) {
  std::vector<std::string> e{"BEFORE_TRAIN_BATCH"};
  for (int i = 0; i < microbatches; ++i) {
    for (const char* n :
         {"BEFORE_FORWARD", "AFTER_FORWARD", "BEFORE_LOSS", "AFTER_LOSS", "BEFORE_BACKWARD", "AFTER_BACKWARD"})
      e.push_back(n);
  }
  e.push_back("AFTER_TRAIN_BATCH");
  return e;
}

TEST(TrainStepTest, OneStepEqualsAHandWrittenLibTorchStep) {
  auto model = testing::make_classifier(8, 16, 4, /*seed=*/5);
  auto reference = testing::make_mlp(8, 16, 4, /*seed=*/5);
  const Batch data = testing::make_blobs(12);
  Rig rig(model);
  TrainStep step(rig.state, rig.engine, rig.logger);
  rig.state.batch = data;
  const auto losses = step.run();
  EXPECT_EQ(names(rig.recorder->events), step_events(1));

  torch::optim::SGD sgd(reference->parameters(), torch::optim::SGDOptions(0.1));
  sgd.zero_grad();
  const at::Tensor ref_loss = torch::cross_entropy_loss(reference->forward(data.input()), data.target());
  ref_loss.backward();
  sgd.step();
  EXPECT_FLOAT_EQ(losses.at("total").item<float>(), ref_loss.item<float>());
  const auto ours = model->parameters(), theirs = reference->parameters();
  ASSERT_EQ(ours.size(), theirs.size());
  for (size_t i = 0; i < ours.size(); ++i) EXPECT_TRUE(torch::allclose(ours[i], theirs[i], 1e-6, 1e-6)) << i;
}

TEST(TrainStepTest, MicrobatchesGiveTheFullBatchGradient) {
  const Batch data = testing::make_blobs(10);
  auto whole = testing::make_classifier(8, 16, 4, 3), split = testing::make_classifier(8, 16, 4, 3);
  Rig a(whole), b(split);
  b.state.device_train_microbatch_size = 4;  // 4 + 4 + 2 samples
  TrainStep sa(a.state, a.engine, a.logger), sb(b.state, b.engine, b.logger);
  a.state.batch = data;
  b.state.batch = data;
  const double la = sa.run().at("total").item<double>(), lb = sb.run().at("total").item<double>();
  EXPECT_NEAR(la, lb, 1e-6);
  EXPECT_EQ(names(b.recorder->events), step_events(3));
  const auto pa = whole->parameters(), pb = split->parameters();
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(torch::allclose(pa[i], pb[i], 1e-5, 1e-6)) << i;
}

// A model with two named losses and no "total" (Composer sums them), or with an explicit "total".
class TwoLossModel : public ComposerModel {
 public:
  explicit TwoLossModel(bool with_total)
      : with_total_(with_total), mlp_(register_module("mlp", testing::make_mlp(8, 16, 4, 9))) {}
  at::Tensor forward(const Batch& batch) override { return mlp_->forward(batch.input()); }
  std::map<std::string, at::Tensor> losses(const at::Tensor& outputs, const Batch& batch) override {
    std::map<std::string, at::Tensor> l{{"ce", torch::cross_entropy_loss(outputs, batch.target())},
                                        {"l2", outputs.pow(2).mean() * 0.01}};
    if (with_total_) l["total"] = l["ce"];  // only the cross entropy backpropagates
    return l;
  }

 private:
  bool with_total_;
  torch::nn::Sequential mlp_;
};

TEST(TrainStepTest, NamedLossesSumUnlessTheModelNamesATotal) {
  const Batch data = testing::make_blobs(8);
  for (bool with_total : {false, true}) {
    auto model = std::make_shared<TwoLossModel>(with_total);
    Rig rig(model);
    TrainStep step(rig.state, rig.engine, rig.logger);
    rig.state.batch = data;
    const auto losses = step.run();
    const double ce = losses.at("ce").item<double>(), l2 = losses.at("l2").item<double>();
    EXPECT_NEAR(losses.at("total").item<double>(), with_total ? ce : ce + l2, 1e-6) << with_total;
    EXPECT_EQ(rig.state.losses.size(), with_total ? 3u : 2u);
  }
}

TEST(TrainerLossesTest, EachNamedLossIsLoggedAsLossTrainName) {
  auto memory = std::make_shared<InMemoryLogger>();
  auto loader = testing::make_loader(testing::make_blobs(16), 8);
  Trainer trainer(testing::quiet_options(std::make_shared<TwoLossModel>(false))
                      .train_dataloader(loader)
                      .max_duration("2ba")
                      .loggers({memory}));
  trainer.fit();
  for (const char* key : {"loss/train/total", "loss/train/ce", "loss/train/l2"}) {
    EXPECT_EQ(memory->values(key).size(), 2u) << key;
  }
  const auto& d = trainer.state().total_loss_dict;
  EXPECT_NEAR(d.at("loss/train/total"), d.at("loss/train/ce") + d.at("loss/train/l2"), 1e-6);
}

TEST(ComposerModelTest, AModelWithoutALossIsAClearError) {
  class NoLoss : public ComposerModel {
   public:
    at::Tensor forward(const Batch& b) override { return b.input(); }
  };
  NoLoss model;
  try {
    model.losses(at::zeros({1}), Batch(at::zeros({1}), at::zeros({1})));
    FAIL() << "expected an error";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("override loss() or losses()"), std::string::npos) << e.what();
  }
}

// Records what the loop units ask of their strategy.
class RecordingStrategy : public dist::Strategy {
 public:
  std::string name() const override { return "recording"; }
  int64_t num_replicas() const override { return replicas; }
  void setup(torch::nn::Module&, torch::optim::Optimizer*) override { calls.push_back("setup"); }
  void begin_step() override { calls.push_back("begin_step"); }
  double mean_batch_samples(double n) override {
    calls.push_back("mean_batch_samples");
    return n;
  }
  void before_backward(bool sync) override {
    calls.push_back(std::string("before_backward:") + (sync ? "sync" : "local"));
  }
  void after_backward(bool sync) override {
    calls.push_back(std::string("after_backward:") + (sync ? "sync" : "local"));
  }
  dist::BatchTotals reduce_batch(dist::BatchTotals local) override {
    calls.push_back("reduce_batch");
    return local;
  }
  void sum_metric_state(at::Tensor&) override { calls.push_back("sum_metric_state"); }
  // Every simulated rank has what this one has: the loops go on while this one has batches.
  int64_t count_ranks_with(bool local) override { return local ? replicas : 0; }
  std::unique_ptr<dist::PhaseScope> enter(dist::Phase phase) override {
    calls.push_back("enter:" + std::to_string(static_cast<int>(phase)));
    return nullptr;
  }
  std::vector<std::string> calls;
  int64_t replicas = 1;
};

TEST(TrainStepTest, SynchronisesGradientsOnlyAfterTheLastMicrobatch) {
  auto strategy = std::make_shared<RecordingStrategy>();
  Rig rig(testing::make_classifier());
  rig.state.strategy = strategy;
  rig.state.device_train_microbatch_size = 3;
  TrainStep step(rig.state, rig.engine, rig.logger);
  rig.state.batch = testing::make_blobs(6);
  step.run();
  const std::vector<std::string> expected{"begin_step", "mean_batch_samples",   "enter:0", "before_backward:local",
                                          "enter:1",    "after_backward:local", "enter:0", "before_backward:sync",
                                          "enter:1",    "after_backward:sync"};
  EXPECT_EQ(strategy->calls, expected);
}

TEST(EvalLoopTest, EvaluatesAloneAndLogsMetricsOverTheStrategy) {
  auto strategy = std::make_shared<RecordingStrategy>();
  strategy->replicas = 2;  // metrics are then summed over the ranks
  auto model = testing::make_classifier();
  Rig rig(model);
  rig.state.strategy = strategy;
  Evaluator val;
  val.label = "val";
  val.dataloader = testing::make_loader(testing::make_blobs(10), 4, false);
  rig.state.evaluators.push_back(val);
  rig.state.eval_metrics["val"] = model->get_metrics(false);
  EvalLoop eval(rig.state, rig.engine, rig.logger, EvalLoopOptions().subset_num_batches(2));
  eval.run(rig.state.evaluators[0]);
  EXPECT_EQ(names(rig.recorder->events),
            (std::vector<std::string>{"EVAL_START", "EVAL_BATCH_START", "EVAL_BEFORE_FORWARD", "EVAL_AFTER_FORWARD",
                                      "EVAL_BATCH_END", "EVAL_BATCH_START", "EVAL_BEFORE_FORWARD", "EVAL_AFTER_FORWARD",
                                      "EVAL_BATCH_END", "EVAL_END"}));
  EXPECT_EQ(rig.state.eval_timestamp.sample, 8);
  EXPECT_EQ(rig.memory->values("metrics/val/Accuracy").size(), 1u);
  EXPECT_EQ(std::count(strategy->calls.begin(), strategy->calls.end(), "sum_metric_state"),
            2);  // Accuracy, CrossEntropy
  EXPECT_TRUE(model->is_training()) << "the model's mode is restored";
}

// On the CPU an unsplit evaluation batch of more than 256 samples runs through the model in pieces of 256
// (detail/cpu_eval_chunks.h) whose outputs are concatenated: the events fire once per batch, State::outputs holds
// every row of the batch, and the metrics equal one whole forward's (device_eval_microbatch_size = the batch, which
// runs it whole). A model with one output for the whole batch is run whole.
TEST(EvalLoopTest, LargeCpuBatchesRunInPiecesThatSeeTheWholeBatch) {
  auto mlp = testing::make_mlp(8, 16, 4, /*seed=*/3);
  std::vector<int64_t> sizes;
  bool pooled = false;  // the model's output: one row for the whole batch
  auto model = std::make_shared<ComposerClassifier>(mlp.ptr(), [&](const at::Tensor& x) {
    sizes.push_back(x.size(0));
    const at::Tensor out = mlp->forward(x);
    return pooled ? out.mean(0, /*keepdim=*/true) : out;
  });
  const Batch data = testing::make_blobs(1300);
  struct Run {
    std::vector<std::string> events;
    int64_t output_rows = 0;
    std::map<std::string, double> metrics;
  };
  auto evaluate = [&](std::optional<int64_t> microbatch) {
    sizes.clear();
    Rig rig(model);
    Evaluator val;
    val.label = "val";
    val.dataloader = testing::make_loader(data, 1000, /*shuffle=*/false);
    val.device_eval_microbatch_size = microbatch;
    rig.state.evaluators.push_back(val);
    rig.state.eval_metrics["val"] = model->get_metrics(false);
    EvalLoop eval(rig.state, rig.engine, rig.logger);
    if (pooled) {
      rig.state.batch = Batch(data.input().narrow(0, 0, 1000), data.target().narrow(0, 0, 1000));
      return Run{{}, detail::eval_forward_in_chunks(*model, rig.state.batch).size(0), {}};
    }
    eval.run(rig.state.evaluators[0]);
    return Run{names(rig.recorder->events), rig.state.outputs.size(0), rig.state.eval_metric_values};
  };
  const Run pieces = evaluate(std::nullopt);
  EXPECT_EQ(sizes, (std::vector<int64_t>{256, 256, 256, 232, 256, 44}));  // batches of 1000 and 300
  EXPECT_EQ(pieces.output_rows, 300);                                     // the last batch, whole
  const Run whole = evaluate(1000);
  EXPECT_EQ(sizes, (std::vector<int64_t>{1000, 300}));
  EXPECT_EQ(pieces.events, whole.events);
  ASSERT_EQ(pieces.metrics.size(), 2u);
  for (const auto& [name, value] : whole.metrics) EXPECT_NEAR(pieces.metrics.at(name), value, 1e-6) << name;
  pooled = true;
  const Run pooled_run = evaluate(std::nullopt);
  EXPECT_EQ(sizes, (std::vector<int64_t>{256, 1000})) << "a pooled output: the first piece, then the batch whole";
  EXPECT_EQ(pooled_run.output_rows, 1);
}

TEST(PredictLoopTest, ReturnsEveryBatchsOutputs) {
  Rig rig(testing::make_classifier());
  PredictLoop predict(rig.state, rig.engine, rig.logger);
  auto loader = testing::make_loader(testing::make_blobs(10), 4, false);
  const auto outputs = predict.run(*loader);
  ASSERT_EQ(outputs.size(), 3u);
  EXPECT_EQ(outputs[2].size(0), 2);
  EXPECT_EQ(rig.recorder->events.front(), Event::PREDICT_START);
  EXPECT_EQ(rig.recorder->events.back(), Event::PREDICT_END);
  EXPECT_EQ(predict.run(*loader, PredictLoopOptions().subset_num_batches(1)).size(), 1u);
}

// The epoch loop and the fit loop over a hand-built train step: the fit-level event order and a resume point.
TEST(FitLoopTest, UnitsAloneGiveComposersEventOrder) {
  Rig rig(testing::make_classifier());
  rig.state.train_dataloader = rig.loader;
  TrainStep step(rig.state, rig.engine, rig.logger);
  EvalLoop eval(rig.state, rig.engine, rig.logger);
  TrainEpochLoop epoch(rig.state, rig.engine, rig.logger, step, eval);
  FitLoop fit(rig.state, rig.engine, rig.logger, epoch, eval);
  torch::manual_seed(1);
  const at::Tensor expected_draw = torch::rand({1});
  torch::manual_seed(1);
  ResumePoint point;
  point.rng = gather_rng_states();
  torch::manual_seed(99);
  fit.resume_from(point);
  auto draw_at_epoch_start = std::make_shared<at::Tensor>();
  struct Draw : Callback {
    explicit Draw(std::shared_ptr<at::Tensor> out) : out_(std::move(out)) {}
    void epoch_start(State&, Logger&) override { *out_ = torch::rand({1}); }
    std::shared_ptr<at::Tensor> out_;
  };
  rig.state.callbacks.push_back(std::make_shared<Draw>(draw_at_epoch_start));
  fit.run();
  EXPECT_TRUE(torch::equal(*draw_at_epoch_start, expected_draw))
      << "the resume point's generator state applies at FIT_START";
  std::vector<std::string> expected{"FIT_START", "ITERATION_START", "EPOCH_START"};
  for (int b = 0; b < 2; ++b) {
    for (const char* n : {"BEFORE_DATALOADER", "AFTER_DATALOADER", "BATCH_START"}) expected.push_back(n);
    for (const auto& n : step_events(1)) expected.push_back(n);
    for (const char* n : {"BATCH_END", "BATCH_CHECKPOINT"}) expected.push_back(n);
  }
  for (const char* n : {"BEFORE_DATALOADER", "EPOCH_END", "EPOCH_CHECKPOINT", "FIT_END"}) expected.push_back(n);
  EXPECT_EQ(names(rig.recorder->events), expected);
  EXPECT_EQ(rig.state.timestamp.epoch, 1);
  EXPECT_EQ(rig.memory->values("loss/train/total").size(), 2u);
}

}  // namespace
}  // namespace composer
