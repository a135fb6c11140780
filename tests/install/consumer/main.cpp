// Trains a linear classifier for 3 batches through the installed library and prints its final loss.
#include <composer/composer.h>

#include <torch/torch.h>

#include <iostream>

int main() {
  using namespace composer;
  seed_all(3);
  const at::Tensor x = torch::randn({48, 4});
  const at::Tensor y = (x.sum(1) > 0).to(at::kLong);
  auto model = ComposerClassifier::wrap(torch::nn::Linear(4, 2));
  Trainer trainer(
      TrainerOptions(model)
          .train_dataloader(std::make_shared<TensorDataLoader>(Batch(x, y), TensorDataLoaderOptions(16)))
          .optimizer(std::make_shared<optim::DecoupledSGDW>(model->parameters(), optim::DecoupledSGDWOptions(0.1)))
          .max_duration("3ba")
          .progress_bar(false));
  trainer.fit();
  std::cout << "consumer: trained " << trainer.state().timestamp.batch << " batches, loss "
            << trainer.state().total_loss_dict.at("loss/train/total") << "\n";
  return 0;
}
