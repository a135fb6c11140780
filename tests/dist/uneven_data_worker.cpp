// A rank of UnevenDataTest: data that does not split evenly over the ranks must not leave one rank alone in a
// collective. Usage:
//   uneven_data_worker streaming MDS_DIR DROP_LAST STRATEGY   a StreamingDataset (129 samples from tests/data/
//       mds_write.py text) in batches of 64, 2 epochs, evaluated on the same data after each (STRATEGY: ddp or
//       full_shard)
//   uneven_data_worker lopsided                               a loader that gives rank 0 three batches an epoch and
//       the other ranks two
// Prints "train_batches EPOCH N" and "train_samples EPOCH N" at each epoch's end, "eval_batches N" and
// "eval_samples N" after each evaluation, and "done" at the end.
#include "composer/composer.h"

#include <ATen/ATen.h>

#include <iostream>

using namespace composer;

namespace {

/// The mean of a sample's tokens, scaled, regressed onto its score.
class TokenRegression : public ComposerModel {
 public:
  TokenRegression() { w_ = register_parameter("w", at::zeros({3}, at::kDouble)); }
  at::Tensor forward(const Batch& batch) override {
    const at::Tensor x = batch.at("tokens").to(at::kDouble).mean(1, true) * 1e-3;
    return (x * w_).sum(1);
  }
  at::Tensor loss(const at::Tensor& outputs, const Batch& batch) override {
    return (outputs - batch.at("score").to(at::kDouble)).pow(2).mean();
  }

 private:
  at::Tensor w_;
};

class CountBatches : public Callback {
 public:
  void batch_end(State& state, Logger&) override {
    ++train_batches_;
    train_samples_ += state.batch.num_samples();
  }
  void epoch_end(State& state, Logger&) override {
    std::cout << "train_batches " << state.timestamp.epoch - 1 << " " << train_batches_ << "\ntrain_samples "
              << state.timestamp.epoch - 1 << " " << train_samples_ << std::endl;
    train_batches_ = train_samples_ = 0;
  }
  void eval_batch_end(State& state, Logger&) override {
    ++eval_batches_;
    eval_samples_ += state.batch.num_samples();
  }
  void eval_end(State&, Logger&) override {
    std::cout << "eval_batches " << eval_batches_ << "\neval_samples " << eval_samples_ << std::endl;
    eval_batches_ = eval_samples_ = 0;
  }

 private:
  int64_t train_batches_ = 0, train_samples_ = 0, eval_batches_ = 0, eval_samples_ = 0;
};

/// Rank 0 gets three batches of 4 samples an epoch, the others two: a user's loader that splits unevenly.
class LopsidedLoader : public DataLoader {
 public:
  std::optional<int64_t> length() const override { return batches(); }
  int64_t batch_size() const override { return 4; }
  void set_epoch(int64_t) override {}
  void reset() override { given_ = 0; }
  std::optional<Batch> next() override {
    if (given_ == batches()) return std::nullopt;
    ++given_;
    const at::Tensor x = at::full({4, 1}, 1.0 + given_, at::kDouble);
    return Batch({{"tokens", x}, {"score", at::ones({4}, at::kDouble)}});
  }
  bool is_distributed() const override { return true; }

 private:
  int64_t batches() const { return dist::get_global_rank() == 0 ? 3 : 2; }
  int64_t given_ = 0;
};

TrainerOptions common(std::shared_ptr<ComposerModel> model) {
  return TrainerOptions(model)
      .optimizer(std::make_shared<torch::optim::SGD>(model->parameters(), torch::optim::SGDOptions(0.1)))
      .max_duration("2ep")
      .device("cpu")
      .seed(5)
      .progress_bar(false)
      .dist_timeout(60)
      .callbacks({std::make_shared<CountBatches>()});
}

}  // namespace

int main(int argc, char** argv) try {
  const std::string mode = argc > 1 ? argv[1] : "";
  auto model = std::make_shared<TokenRegression>();
  if (mode == "lopsided" && argc == 2) {
    Trainer trainer(common(model).train_dataloader(std::make_shared<LopsidedLoader>()));
    trainer.fit();
  } else if (mode == "streaming" && argc == 5) {
    const bool drop_last = std::string(argv[3]) == "1";
    auto data = std::make_shared<StreamingDataset>(
        StreamingDatasetOptions().local(argv[2]).shuffle(true).columns({"tokens", "score"}));
    auto eval_data = std::make_shared<StreamingDataset>(
        StreamingDatasetOptions().local(argv[2]).shuffle(false).columns({"tokens", "score"}));
    TrainerOptions options =
        common(model)
            .train_dataloader(make_streaming_loader(data, DatasetLoaderOptions(64).num_workers(0).drop_last(drop_last)))
            .eval_dataloader(
                make_streaming_loader(eval_data, DatasetLoaderOptions(64).num_workers(0).drop_last(drop_last)))
            .eval_interval("1ep");
    if (std::string(argv[4]) != "ddp") {
      options.parallelism_config(dist::ParallelismConfig().fsdp(
          dist::FSDPOptions().sharding_strategy(dist::sharding_strategy_from_string(argv[4], "STRATEGY"))));
    }
    Trainer trainer(options);
    trainer.fit();
  } else {
    std::cerr << "usage: uneven_data_worker streaming MDS_DIR DROP_LAST STRATEGY | lopsided\n";
    return 2;
  }
  std::cout << "done" << std::endl;
  return 0;
} catch (const std::exception& e) {
  std::cerr << "uneven_data_worker: " << e.what() << "\n";
  return 1;
}
