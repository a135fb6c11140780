// What a Trainer step dispatches beyond a hand-written LibTorch loop's step, counted with a global RecordFunction
// observer: on small models every dispatched operator is time (issue 45), so the extra ops are bounded.
#include "support/test_support.h"

#include <ATen/record_function.h>
#include <gtest/gtest.h>

#include <atomic>

namespace composer {
namespace {

std::atomic<bool> counting{false};
std::atomic<int64_t> ops{0};

// Operators and autograd nodes dispatched while `run` runs.
template <class F>
int64_t ops_during(F&& run) {
  ops = 0;
  counting = true;
  run();
  counting = false;
  return ops.load();
}

struct OpCounter {
  OpCounter() {
    handle = at::addGlobalCallback(
        at::RecordFunctionCallback([](const at::RecordFunction&) -> std::unique_ptr<at::ObserverContext> {
          if (counting) ++ops;
          return nullptr;
        }).scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION}));
  }
  ~OpCounter() { at::removeCallback(handle); }
  at::CallbackHandle handle;
};

const Batch& data() {
  static const Batch d = testing::make_blobs(64 * 8, 32, 10);
  return d;
}

void hand_loop(int64_t batches) {
  auto net = testing::make_mlp(32, 64, 10);
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  auto loader = testing::make_loader(data(), 64);
  loader->reset();
  for (int64_t i = 0; i < batches; ++i) {
    const Batch b = *loader->next();
    opt.zero_grad();
    at::Tensor loss = at::cross_entropy_loss(net->forward(b.input()), b.target());
    loss.backward();
    opt.step();
    (void)loss.item<float>();
  }
}

void trainer_fit(int64_t batches) {
  auto model = testing::make_classifier(32, 64, 10);
  auto opt = std::make_shared<torch::optim::SGD>(model->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  Trainer trainer(testing::quiet_options(model)
                      .train_dataloader(testing::make_loader(data(), 64))
                      .optimizer(opt)
                      .max_duration(Time(batches, TimeUnit::BATCH)));
  trainer.fit();
}

// Per step: the difference between a 6-batch and a 2-batch run over 4, so set-up and the first step's lazy state
// (momentum buffers) do not count.
template <class F>
double per_step(F&& run) {
  const int64_t two = ops_during([&] { run(2); });
  const int64_t six = ops_during([&] { run(6); });
  return static_cast<double>(six - two) / 4;
}

// The Trainer adds the train metric (Accuracy's update, as Composer computes train metrics every step) and the copy
// of the loss it logs: 24.5 ops here (hand 151.5). It was 68.5 while a loss of weight 1 was still multiplied by 1 (a
// product and its backward node) and a 0-d loss averaged, and 36.5 while the metric's state took its count through
// views and a cast, and a batch already on the device and a float loss were still converted (no-op dispatches).
TEST(StepOpsTest, ATrainerStepDispatchesFewOpsBeyondAHandWrittenStep) {
  OpCounter counter;
  const double hand = per_step(hand_loop);
  const double trainer = per_step(trainer_fit);
  RecordProperty("hand_ops_per_step", std::to_string(hand));
  RecordProperty("trainer_ops_per_step", std::to_string(trainer));
  EXPECT_GT(hand, 100) << "the observer must see the hand loop's operators";
  EXPECT_LE(trainer - hand, 28) << "hand " << hand << " ops a step, Trainer " << trainer;
}

}  // namespace
}  // namespace composer
