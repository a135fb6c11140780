// A complete training program with the library: a CNN on Fashion-MNIST, evaluated every epoch.
//   ./build/examples/train_fashion_mnist data/fashion-mnist
#include <composer/composer.h>

#include <iostream>

int main(int argc, char** argv) {
  using namespace composer;
  seed_all(17);  // before the model: the same seed gives the same run, bit for bit
  const std::string root = argc > 1 ? argv[1] : "data/fashion-mnist";
  const auto normalize = make_image_transform(ImageTransformOptions().mean({0.2860}).std({0.3530}));
  auto train = std::make_shared<DatasetLoader>(load_mnist(root, /*train=*/true),
                                               DatasetLoaderOptions(128).shuffle(true).seed(17).transform(normalize));
  auto test = std::make_shared<DatasetLoader>(load_mnist(root, /*train=*/false),
                                              DatasetLoaderOptions(1000).shuffle(false).transform(normalize));
  auto model = ComposerClassifier::wrap(models::mnist_cnn());
  auto optimizer = std::make_shared<optim::DecoupledSGDW>(
      model->parameters(), optim::DecoupledSGDWOptions(0.05).momentum(0.9).weight_decay(5e-4));

  Trainer trainer(TrainerOptions(model)
                      .train_dataloader(train)
                      .eval_dataloader(test)
                      .optimizer(optimizer)
                      .schedulers({std::make_shared<CosineAnnealingWithWarmupScheduler>(Time::from_string("100ba"))})
                      .max_duration("2ep")
                      .seed(17)
                      .device("cpu")
                      .callbacks({std::make_shared<SpeedMonitor>(50)}));
  trainer.fit();
  std::cout << "test accuracy: " << trainer.state().eval_metric_values.at("Accuracy") << "\n";
}
