// A rank of StreamingResumeTest: trains a tiny regression on MDS text shards (tests/data/mds_write.py text) through a
// StreamingDataset loader, shuffled, 8 samples per rank per batch; prints "seen OFFSET" for every sample it trains on
// (the 'offset' column is unique per sample). Usage: streaming_resume_worker MDS_DIR MAX_DURATION SAVE_FOLDER
// [LOAD_PATH]: saves every 5 batches into SAVE_FOLDER, loads LOAD_PATH first when given.
#include "composer/composer.h"

#include <ATen/ATen.h>

#include <iostream>

using namespace composer;

namespace {

/// The mean of a sample's tokens, scaled, regressed onto its score.
class TokenRegression : public ComposerModel {
 public:
  TokenRegression() { w_ = register_parameter("w", at::zeros({1}, at::kDouble)); }
  at::Tensor forward(const Batch& batch) override { return batch.at("tokens").to(at::kDouble).mean(1) * 1e-3 * w_; }
  at::Tensor loss(const at::Tensor& outputs, const Batch& batch) override {
    return (outputs - batch.at("score").to(at::kDouble)).pow(2).mean();
  }

 private:
  at::Tensor w_;
};

class PrintSeen : public Callback {
 public:
  void after_dataloader(State& state, Logger&) override {
    const at::Tensor offsets = state.batch.at("offset");
    for (int64_t i = 0; i < offsets.size(0); ++i) std::cout << "seen " << offsets[i].item<int64_t>() << "\n";
    std::cout.flush();
  }
};

}  // namespace

int main(int argc, char** argv) try {
  if (argc != 4 && argc != 5) {
    std::cerr << "usage: streaming_resume_worker MDS_DIR MAX_DURATION SAVE_FOLDER [LOAD_PATH]\n";
    return 2;
  }
  auto data = std::make_shared<StreamingDataset>(
      StreamingDatasetOptions().local(argv[1]).shuffle(true).shuffle_block_size(50).columns(
          {"tokens", "score", "offset"}));
  auto model = std::make_shared<TokenRegression>();
  TrainerOptions options =
      TrainerOptions(model)
          .train_dataloader(make_streaming_loader(data, DatasetLoaderOptions(8).num_workers(0)))
          .optimizer(std::make_shared<torch::optim::SGD>(model->parameters(), torch::optim::SGDOptions(0.1)))
          .max_duration(argv[2])
          .device("cpu")
          .seed(5)
          .progress_bar(false)
          .dist_timeout(60)
          .run_name("streaming")
          .save_folder(argv[3])
          .save_interval("5ba")
          .callbacks({std::make_shared<PrintSeen>()});
  if (argc == 5) options.load_path(argv[4]);
  Trainer trainer(options);
  trainer.fit();
  return 0;
} catch (const std::exception& e) {
  std::cerr << "streaming_resume_worker: " << e.what() << "\n";
  return 1;
}
