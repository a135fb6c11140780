// The methods that change how the optimizer steps or what it steps on: SAM (two passes through the Trainer's
// closure, microbatching, checkpoints), SWA (the averaged weights replace the model's, resume) and
// SelectiveBackprop (the highest-loss samples of a batch, scaled selection passes).
#include "algorithms/algo_support.h"
#include "support/errors.h"
#include "support/test_support.h"

#include <gtest/gtest.h>

#include <filesystem>

using namespace composer;
using composer::testing::error_of;

namespace {

std::vector<at::Tensor> snapshot(const torch::nn::Module& m) {
  std::vector<at::Tensor> out;
  for (const auto& p : m.parameters()) out.push_back(p.detach().clone());
  return out;
}

void expect_close(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b, const std::string& what,
                  double atol = 1e-6) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_TRUE(torch::allclose(a[i], b[i], 1e-5, atol)) << what << " [" << i << "]";
}

TrainerOptions blob_run(std::shared_ptr<ComposerModel> model, int64_t batch_size = 16, int64_t n = 64) {
  const Batch data = composer::testing::make_blobs(n);
  return composer::testing::quiet_options(std::move(model))
      .train_dataloader(composer::testing::make_loader(data, batch_size));
}

// Counts events and keeps the batch size seen at each BEFORE_FORWARD.
class StepRecorder : public Callback {
 public:
  void before_train_batch(State&, Logger&) override { ++train_batches; }
  void before_forward(State& state, Logger&) override { forward_sizes.push_back(state.batch.num_samples()); }
  void batch_end(State& state, Logger&) override { losses.push_back(state.total_loss_dict.at("loss/train/total")); }
  int train_batches = 0;
  std::vector<int64_t> forward_sizes;
  std::vector<double> losses;
};

// An algorithm that keeps the model's weights at each BATCH_END, run before or after the one under test.
class WeightProbe : public Algorithm {
 public:
  bool match(Event event, const State&) override { return event == Event::BATCH_END; }
  std::optional<int> apply(Event, State& state, Logger&) override {
    weights.push_back(snapshot(*state.model));
    return std::nullopt;
  }
  std::string name() const override { return "WeightProbe"; }
  std::vector<std::vector<at::Tensor>> weights;
};

}  // namespace

// Through the Trainer: each step runs BEFORE_TRAIN_BATCH .. AFTER_TRAIN_BATCH twice, the logged loss is the first
// (unperturbed) pass's, and the step is SAM's: the same weights as a hand-driven SAMOptimizer on the same batches.
TEST(SAMTest, TheTrainersClosureRunsTwicePerStepAndTheStepIsSAMs) {
  auto model = composer::testing::make_classifier();
  auto recorder = std::make_shared<StepRecorder>();
  auto optimizer = std::make_shared<torch::optim::SGD>(model->parameters(), torch::optim::SGDOptions(0.1));
  Trainer trainer(blob_run(model)
                      .optimizer(optimizer)
                      .max_duration(Time::from_batch(4))
                      .algorithms({algorithms::make_algorithm("sam", {{"rho", "0.1"}})})
                      .callbacks({recorder}));
  EXPECT_NE(dynamic_cast<algorithms::SAMOptimizer*>(trainer.state().optimizer.get()), nullptr);
  trainer.fit();
  EXPECT_EQ(recorder->train_batches, 8);

  // The same four batches, by hand.
  auto reference = composer::testing::make_classifier();
  auto base = std::make_shared<torch::optim::SGD>(reference->parameters(), torch::optim::SGDOptions(0.1));
  algorithms::SAMOptimizer sam(base, 0.1);
  auto loader = composer::testing::make_loader(composer::testing::make_blobs(64), 16);
  loader->set_epoch(0);
  loader->reset();
  std::vector<double> first_losses;
  int64_t seen = 0;
  for (auto next = loader->next(); seen < 4 && next; next = loader->next(), ++seen) {
    const Batch batch = *next;
    bool first = true;
    sam.step([&] {
      sam.zero_grad();
      at::Tensor loss = reference->loss(reference->forward(batch), batch);
      loss.backward();
      if (first) first_losses.push_back(loss.item<double>());
      first = false;
      return loss.detach();
    });
  }
  ASSERT_EQ(seen, 4);
  expect_close(snapshot(*model), snapshot(*reference), "Trainer+SAM vs hand-driven SAMOptimizer");
  ASSERT_EQ(recorder->losses.size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(recorder->losses[i], first_losses[i], 1e-6) << i;
}

// Microbatches: the ascent uses the gradient of the whole batch, so four microbatches give the weights of one.
TEST(SAMTest, MicrobatchingGivesTheWholeBatchStep) {
  auto run = [](int64_t microbatch) {
    auto model = composer::testing::make_classifier();
    auto recorder = std::make_shared<StepRecorder>();
    Trainer trainer(blob_run(model)
                        .max_duration(Time::from_batch(3))
                        .device_train_microbatch_size(microbatch)
                        .algorithms({algorithms::make_algorithm("sam", {})})
                        .callbacks({recorder}));
    trainer.fit();
    return std::make_pair(snapshot(*model), recorder->forward_sizes);
  };
  const auto [whole, whole_sizes] = run(0);
  const auto [micro, micro_sizes] = run(4);
  EXPECT_EQ(whole_sizes, std::vector<int64_t>(6, 16));
  EXPECT_EQ(micro_sizes, std::vector<int64_t>(24, 4));
  expect_close(whole, micro, "microbatches of 4 vs the whole batch", 1e-5);
}

// interval 2: SAM steps alternate with plain ones, the count is in the checkpoint, and a run resumed from it ends
// where the uninterrupted run does.
TEST(SAMTest, IntervalAlternatesAndResumeKeepsTheCount) {
  const auto dir = std::filesystem::temp_directory_path() / "sam_checkpoints";
  std::filesystem::remove_all(dir);
  auto run = [&](std::shared_ptr<ComposerModel> model, const std::string& folder, const std::string& load,
                 std::shared_ptr<StepRecorder> recorder) {
    auto opts = blob_run(std::move(model))
                    .max_duration(Time::from_batch(4))
                    .algorithms({algorithms::make_algorithm("sam", {{"interval", "2"}})})
                    .callbacks({recorder})
                    .save_folder(folder)
                    .save_interval(Time::from_batch(1));
    if (!load.empty()) opts.load_path(load);
    return opts;
  };
  auto full_model = composer::testing::make_classifier();
  auto full_recorder = std::make_shared<StepRecorder>();
  {
    Trainer full(run(full_model, (dir / "full").string(), "", full_recorder));
    full.fit();
  }
  EXPECT_EQ(full_recorder->train_batches, 6);  // batches 2 and 4 are SAM steps
  const std::string ckpt = (dir / "full" / "ep0-ba1-rank0.pt").string();
  ASSERT_TRUE(std::filesystem::exists(ckpt));
  const auto state = read_checkpoint(ckpt).toGenericDict().at("state").toGenericDict();
  const auto sam_state = state.at("algorithms").toList().get(0).toTuple()->elements().at(1).toGenericDict();
  EXPECT_EQ(sam_state.at("global_step").toInt(), 1);
  EXPECT_TRUE(state.at("optimizers").toGenericDict().contains("DecoupledSGDW"))
      << "the checkpoint names the optimizer SAM wraps";

  auto resumed_model = composer::testing::make_classifier(8, 16, 4, 9);
  auto resumed_recorder = std::make_shared<StepRecorder>();
  {
    Trainer resumed(run(resumed_model, (dir / "resumed").string(), ckpt, resumed_recorder));
    resumed.fit();
  }
  EXPECT_EQ(resumed_recorder->train_batches, 5);  // batches 2 (SAM), 3, 4 (SAM)
  expect_close(snapshot(*resumed_model), snapshot(*full_model), "resumed vs uninterrupted");
  std::filesystem::remove_all(dir);
}

TEST(SAMTest, BadArgumentsAreNamed) {
  EXPECT_EQ(error_of([] { algorithms::make_algorithm("sam", {{"rho", "-0.1"}}); }), "SAM.rho must be >= 0, got -0.1");
  EXPECT_EQ(error_of([] {
              algorithms::make_algorithm("sam", {{"epsilon", "0"}});
            }),
            "SAM.epsilon must be > 0, got 0.0");
  EXPECT_EQ(error_of([] {
              algorithms::make_algorithm("sam", {{"interval", "0"}});
            }),
            "SAM.interval must be >= 1, got 0.0");
  auto model = composer::testing::make_classifier();
  auto base = std::make_shared<torch::optim::SGD>(model->parameters(), torch::optim::SGDOptions(0.1));
  algorithms::SAMOptimizer sam(base);
  EXPECT_EQ(error_of([&] { sam.step(nullptr); }), "SAMOptimizer.step: sharpness-aware minimization needs a closure");
}

// The average of the weights after each BATCH_END from swa_start replaces the model's at swa_end (the BatchNorm-free
// model's buffers are none); training then continues from it.
TEST(SWATest, TheAverageOfTheWeightsReplacesTheModelAtSwaEnd) {
  auto model = composer::testing::make_classifier();
  auto before = std::make_shared<WeightProbe>(), after = std::make_shared<WeightProbe>();
  Trainer trainer(
      blob_run(model, 8, 80)
          .max_duration(Time::from_batch(10))
          // BATCH_END runs its algorithms in list order (only AFTER_* events reverse it).
          .algorithms({before,
                       algorithms::make_algorithm(
                           "swa", {{"swa_start", "0.5dur"}, {"swa_end", "0.9dur"}, {"update_interval", "1ba"}}),
                       after}));
  trainer.fit();
  ASSERT_EQ(before->weights.size(), 10u);
  // BATCH_END k (1-based) sees elapsed k/10: updates at k = 5..9, and k = 9 loads the average.
  for (size_t p = 0; p < before->weights[0].size(); ++p) {
    at::Tensor mean = at::zeros_like(before->weights[4][p]);
    for (size_t k = 4; k <= 8; ++k) mean += before->weights[k][p];
    mean /= 5.0;
    EXPECT_TRUE(torch::allclose(after->weights[8][p], mean, 1e-5, 1e-6)) << p;
  }
  for (size_t p = 0; p < before->weights[0].size(); ++p) {
    EXPECT_TRUE(torch::equal(after->weights[7][p], before->weights[7][p])) << "before swa_end the weights are kept";
  }
  auto* swa = dynamic_cast<algorithms::SWA*>(trainer.state().algorithms.at(1).get());
  ASSERT_NE(swa, nullptr);
  EXPECT_TRUE(swa->swa_completed());
  EXPECT_EQ(swa->swa_model()->n_averaged, 5);
}

// With schedule_swa_lr the rate anneals towards the schedule's rate at the start; a run resumed mid-averaging from
// a checkpoint (average, counters and SWALR in it) ends where the uninterrupted run does.
TEST(SWATest, CheckpointMidAveragingResumesExactly) {
  const auto dir = std::filesystem::temp_directory_path() / "swa_checkpoints";
  std::filesystem::remove_all(dir);
  auto run = [&](std::shared_ptr<ComposerModel> model, const std::string& folder, const std::string& load) {
    auto opts = blob_run(std::move(model), 8, 80)
                    .max_duration(Time::from_batch(10))
                    .schedulers({std::make_shared<LinearScheduler>(LinearSchedulerOptions().alpha_f(0.5))})
                    .algorithms({algorithms::make_algorithm("swa", {{"swa_start", "0.3dur"},
                                                                    {"swa_end", "0.8dur"},
                                                                    {"update_interval", "2ba"},
                                                                    {"schedule_swa_lr", "true"},
                                                                    {"anneal_steps", "2"}})})
                    .save_folder(folder)
                    .save_interval(Time::from_batch(5));
    if (!load.empty()) opts.load_path(load);
    return opts;
  };
  auto full_model = composer::testing::make_classifier();
  {
    Trainer full(run(full_model, (dir / "full").string(), ""));
    full.fit();
  }
  const std::string ckpt = (dir / "full" / "ep0-ba5-rank0.pt").string();
  ASSERT_TRUE(std::filesystem::exists(ckpt));
  const auto state = read_checkpoint(ckpt).toGenericDict().at("state").toGenericDict();
  const auto swa_state = state.at("algorithms").toList().get(0).toTuple()->elements().at(1).toGenericDict();
  EXPECT_TRUE(swa_state.at("swa_started").toBool());
  EXPECT_FALSE(swa_state.at("swa_completed").toBool());
  EXPECT_EQ(swa_state.at("step_counter").toInt(), 3);
  EXPECT_EQ(swa_state.at("swa_model").toGenericDict().at("n_averaged").toTensor().item<int64_t>(), 2);

  auto resumed_model = composer::testing::make_classifier(8, 16, 4, 9);
  {
    Trainer resumed(run(resumed_model, (dir / "resumed").string(), ckpt));
    resumed.fit();
  }
  expect_close(snapshot(*resumed_model), snapshot(*full_model), "resumed vs uninterrupted");
  std::filesystem::remove_all(dir);
}

TEST(SWATest, BadArgumentsAndStatesAreNamed) {
  EXPECT_EQ(error_of([] {
              algorithms::make_algorithm("swa", {{"swa_start", "2ep"}, {"swa_end", "0.9dur"}});
            }),
            "SWA.swa_start and swa_end must have the same unit, got 2ep and 0.9dur");
  EXPECT_EQ(error_of([] {
              algorithms::make_algorithm("swa", {{"swa_start", "10ba"}, {"swa_end", "20ba"}});
            }),
            "SWA.swa_start must be in 'dur' or 'ep', got 10ba");
  EXPECT_EQ(error_of([] {
              algorithms::make_algorithm("swa", {{"swa_start", "0.9dur"}, {"swa_end", "0.5dur"}});
            }),
            "SWA.swa_end must be after swa_start, got 0.5dur <= 0.9dur");
  EXPECT_EQ(error_of([] {
              algorithms::make_algorithm("swa", {{"update_interval", "0.5dur"}});
            }),
            "SWA.update_interval must be in 'ba' or 'ep', got 0.5dur");
  EXPECT_EQ(error_of([] {
              algorithms::make_algorithm("swa", {{"anneal_steps", "0"}});
            }),
            "SWA.anneal_steps must be > 0, got 0.0");
  EXPECT_NE(error_of([] {
              algorithms::make_algorithm("swa", {{"anneal_strategy", "step"}});
            }).find("expected one of linear, lin, cos, cosine, got 'step'"),
            std::string::npos);
  algorithms::SWA swa;
  Dict bad = new_dict();
  bad.insert("repr", swa.repr());
  bad.insert("swa_started", true);
  EXPECT_EQ(error_of([&] { swa.load_state_dict(bad); }), "SWA checkpoint state: started, but has no swa_model");
  bad.insert("step_counter", std::string("three"));
  EXPECT_EQ(error_of([&] { swa.load_state_dict(bad); }), "SWA checkpoint state: step_counter must be an integer");
  EXPECT_FALSE(swa.swa_started()) << "a bad state changes nothing";
}

// The samples kept are rows of the batch with their own targets, int(keep * N) of them, and the highest losses
// are kept far more often than the lowest.
TEST(SelectiveBackpropTest, KeepsTheHighLossSamplesMostOften) {
  const int64_t n = 10;
  const at::Tensor input = at::arange(n, at::kFloat).view({n, 1});  // the "loss" of sample i is i
  const at::Tensor target = at::arange(n, at::kLong) * 100;
  auto model = [](const at::Tensor& x) { return x; };
  auto loss = [](const at::Tensor& outputs, const at::Tensor&) { return outputs.view(-1); };
  std::vector<int64_t> counts(n, 0);
  torch::manual_seed(0);
  for (int trial = 0; trial < 400; ++trial) {
    const auto [x, y] = functional::select_using_loss(input, target, model, loss, 0.3);
    ASSERT_EQ(x.size(0), 3);
    EXPECT_TRUE(torch::equal(y, x.view(-1).to(at::kLong) * 100)) << "targets travel with their samples";
    EXPECT_EQ(std::get<0>(at::_unique(x)).numel(), 3) << "drawn without replacement";
    for (int64_t i = 0; i < 3; ++i) ++counts[static_cast<size_t>(x[i][0].item<float>())];
  }
  EXPECT_GT(counts[9], 4 * std::max<int64_t>(counts[0], 1)) << counts[9] << " vs " << counts[0];
  EXPECT_GT(counts[9], counts[5]);
  // keep 1 keeps everything.
  const auto [all, all_targets] = functional::select_using_loss(input, target, model, loss, 1.0);
  EXPECT_EQ(all.size(0), n);
}

// Through the Trainer: from start to end the batch shrinks to keep * N on the batches should_selective_backprop
// chooses, and the model's per-sample loss ranks; scaled selection passes work on images.
TEST(SelectiveBackpropTest, ChosenBatchesShrinkInTheTrainer) {
  auto model = composer::testing::make_classifier();
  auto recorder = std::make_shared<StepRecorder>();
  Trainer trainer(blob_run(model, 8, 80)
                      .max_duration(Time::from_batch(10))
                      .algorithms({algorithms::make_algorithm("selective_backprop",
                                                              {{"start", "0.2"}, {"end", "0.8"}, {"keep", "0.5"}})})
                      .callbacks({recorder}));
  trainer.fit();
  // AFTER_DATALOADER of batch k (0-based) sees elapsed k/10; chosen for k in [2, 8) with (k + 1) % 2 != 0.
  std::vector<int64_t> expected;
  for (int64_t k = 0; k < 10; ++k) expected.push_back(k >= 2 && k < 8 && (k + 1) % 2 != 0 ? 4 : 8);
  EXPECT_EQ(recorder->forward_sizes, expected);

  const at::Tensor images = at::randn({8, 3, 8, 8});
  const at::Tensor labels = at::randint(0, 10, {8}, at::kLong);
  auto convnet = composer::testing::tiny_convnet();
  auto classifier = ComposerClassifier::wrap(convnet);
  std::vector<int64_t> seen_widths;
  const auto [x, y] = functional::select_using_loss(
      images, labels,
      [&](const at::Tensor& in) {
        seen_widths.push_back(in.size(3));
        return classifier->forward(Batch(in, labels));
      },
      [&](const at::Tensor& out, const at::Tensor& t) { return classifier->per_sample_loss(out, Batch(images, t)); },
      0.5, 0.5);
  EXPECT_EQ(seen_widths, std::vector<int64_t>{4});
  EXPECT_EQ(x.sizes(), (std::vector<int64_t>{4, 3, 8, 8})) << "the kept samples are full size";
}

TEST(SelectiveBackpropTest, BadArgumentsAndModelsAreNamed) {
  EXPECT_EQ(error_of([] {
              algorithms::make_algorithm("selective_backprop", {{"keep", "0"}});
            }),
            "SelectiveBackprop.keep must be in (0.0, 1.0], got 0.0");
  EXPECT_EQ(error_of([] {
              algorithms::make_algorithm("selective_backprop", {{"start", "0.6"}, {"end", "0.5"}});
            }),
            "SelectiveBackprop.end must be in [0.6, 1.0], got 0.5");
  EXPECT_EQ(error_of([] {
              algorithms::make_algorithm("selective_backprop", {{"scale_factor", "1.5"}});
            }),
            "SelectiveBackprop.scale_factor must be in (0.0, 1.0], got 1.5");
  const at::Tensor flat = at::randn({4, 3});
  auto id = [](const at::Tensor& x) { return x; };
  auto row_sum = [](const at::Tensor& o, const at::Tensor&) { return o.sum(1); };
  EXPECT_EQ(error_of([&] { functional::select_using_loss(flat, at::zeros({4}), id, row_sum, 0.5, 0.5); }),
            "select_using_loss: with scale_factor < 1 the input must be 3-, 4- or 5-D, got 2-D");
  EXPECT_EQ(error_of([&] {
              functional::select_using_loss(flat, at::zeros({4}), id,
                                            [](const at::Tensor& o, const at::Tensor&) { return o; });
            }),
            "select_using_loss: the per-sample loss must have shape [4], got [4, 3]");
  auto custom =
      ComposerClassifier::wrap(composer::testing::make_mlp(3, 4, 2),
                               [](const at::Tensor& l, const at::Tensor& t) { return at::cross_entropy_loss(l, t); });
  EXPECT_EQ(error_of([&] {
              custom->per_sample_loss(at::zeros({2, 2}), Batch(at::zeros({2, 3}), at::zeros({2}, at::kLong)));
            }),
            "ComposerClassifier.per_sample_loss: a custom loss function has no per-sample form; override "
            "per_sample_loss");
}
