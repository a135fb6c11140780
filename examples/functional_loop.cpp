// A hand-written LibTorch training loop that uses Composer C++'s algorithms in their functional form
// (composer::functional), without the Trainer: BlurPool and ChannelsLast surgery on the model, CutOut and MixUp on
// each batch, label smoothing on the targets.
//   build/examples/functional_loop [data/fashion-mnist]
#include <composer/composer.h>
#include <composer/functional.h>

#include <cstdio>

int main(int argc, char** argv) {
  using namespace composer;
  const std::string root = argc > 1 ? argv[1] : "data/fashion-mnist";
  configure_threads();
  torch::manual_seed(0);
  const auto normalize = make_image_transform(ImageTransformOptions().mean({0.2860}).std({0.3530}));
  DatasetLoader train(load_mnist(root, /*train=*/true), DatasetLoaderOptions(128).shuffle(true).transform(normalize));
  DatasetLoader test(load_mnist(root, /*train=*/false), DatasetLoaderOptions(1000).shuffle(false).transform(normalize));

  auto net = models::cifar_resnet(8, 10, /*in_channels=*/1);  // surgery-ready: built from nn::Composite
  functional::apply_blurpool(*net);                           // before the optimizer exists
  functional::apply_channels_last(*net);
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9).weight_decay(5e-4));

  train.set_epoch(0);
  train.reset();
  int64_t step = 0;
  while (auto batch = train.next()) {
    at::Tensor x = functional::cutout_batch(batch->input(), /*num_holes=*/1, /*length=*/0.25);
    auto [mixed, y_perm, m] = functional::mixup_batch(x, batch->target(), std::nullopt, /*alpha=*/0.2);
    const at::Tensor logits = net->forward(mixed);
    const at::Tensor y = functional::smooth_labels(logits, batch->target(), 0.1) * (1 - m) +
                         functional::smooth_labels(logits, y_perm, 0.1) * m;
    const at::Tensor loss = soft_cross_entropy(logits, y);
    opt.zero_grad();
    loss.backward();
    opt.step();
    if (++step % 100 == 0) std::printf("step %lld loss %.4f\n", static_cast<long long>(step), loss.item<double>());
  }
  net->eval();
  torch::NoGradGuard no_grad;
  int64_t correct = 0, total = 0;
  test.set_epoch(0);
  test.reset();
  while (auto batch = test.next()) {
    correct += net->forward(batch->input()).argmax(1).eq(batch->target()).sum().item<int64_t>();
    total += batch->num_samples();
  }
  std::printf("test accuracy after 1 epoch: %.4f\n", static_cast<double>(correct) / static_cast<double>(total));
}
