// A hand-written training loop that drives Composer C++'s TrainStep unit with the Engine, so algorithms and callbacks
// run at their events exactly as under the Trainer, while the loop itself (data, epochs, evaluation) stays yours.
//   build/examples/train_step_loop [data/fashion-mnist]
#include <composer/composer.h>

#include <cstdio>

namespace {

// A callback of the kind a user writes: prints the loss every 100 batches (AFTER_TRAIN_BATCH holds state.loss).
class PrintLoss : public composer::Callback {
 public:
  void after_train_batch(composer::State& state, composer::Logger&) override {
    if (++batches_ % 100 == 0)
      std::printf("batch %lld loss %.4f\n", static_cast<long long>(batches_), state.loss.item<double>());
  }

 private:
  int64_t batches_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  using namespace composer;
  const std::string root = argc > 1 ? argv[1] : "data/fashion-mnist";
  configure_threads();
  seed_all(0);
  const auto normalize = make_image_transform(ImageTransformOptions().mean({0.2860}).std({0.3530}));
  DatasetLoader train(load_mnist(root, /*train=*/true), DatasetLoaderOptions(128).shuffle(true).transform(normalize));

  // The pieces the Trainer would assemble: State, Logger, Engine.
  State state;
  Logger logger(state);
  Engine engine(state, logger);
  state.model = ComposerClassifier::wrap(models::mnist_cnn(/*in_channels=*/1, /*num_classes=*/10));
  state.algorithms = {std::make_shared<algorithms::BlurPool>(), std::make_shared<algorithms::LabelSmoothing>()};
  state.callbacks = {std::make_shared<PrintLoss>()};
  engine.run_event(Event::INIT);  // BlurPool's surgery happens here, before the optimizer exists
  state.optimizer = std::make_shared<optim::DecoupledSGDW>(state.model->parameters(),
                                                           optim::DecoupledSGDWOptions(0.05).momentum(0.9));

  // The unit: BEFORE_TRAIN_BATCH .. AFTER_TRAIN_BATCH and the optimizer step (label smoothing runs at BEFORE_LOSS).
  TrainStep step(state, engine, logger);
  state.set_dataloader(&train, "train");  // Composer's Engine wants a loader and a duration for training events
  state.max_duration = Time::from_epoch(1);
  state.model->train();
  train.set_epoch(0);
  train.reset();
  while (auto batch = train.next()) {
    state.batch = *batch;
    step.run();
    state.timestamp = state.timestamp.to_next_batch(batch->num_samples());  // what schedulers and algorithms read
  }
  engine.close();

  DatasetLoader test(load_mnist(root, /*train=*/false), DatasetLoaderOptions(1000).shuffle(false).transform(normalize));
  state.model->eval();
  torch::NoGradGuard no_grad;
  int64_t correct = 0, total = 0;
  test.set_epoch(0);
  test.reset();
  while (auto batch = test.next()) {
    correct += state.model->forward(*batch).argmax(1).eq(batch->target()).sum().item<int64_t>();
    total += batch->num_samples();
  }
  std::printf("test accuracy after 1 epoch: %.4f\n", static_cast<double>(correct) / static_cast<double>(total));
}
