// A training process for the resume tests: killed with SIGKILL and restarted, it must end with exactly the weights
// and losses of an uninterrupted run. Usage: resume_worker FOLDER LOG_FILE MAX_BATCHES [WEIGHTS_FILE]
// FOLDER is the save folder (a path or an object-store URI such as s3://bucket/run).
// Prints "pid P" at start and "batch N" after every batch; writes WEIGHTS_FILE (default FOLDER/final-weights.pt)
// when done. RESUME_WORKER_SAVE_ASYNC=1 writes the checkpoints in the background (save_async). Under
// composer-cpp launch (WORLD_SIZE > 1) each rank trains on its shard and rank R > 0 logs to LOG_FILE.rankR.
#include "composer/composer.h"

#include <torch/serialize.h>

#include <cstdlib>
#include <iostream>
#include <string>

#include <unistd.h>

using namespace composer;

class PrintBatch : public Callback {
 public:
  void batch_end(State& s, Logger&) override { std::cout << "batch " << s.timestamp.batch << std::endl; }
};

int main(int argc, char** argv) {
  if (argc != 4 && argc != 5) {
    std::cerr << "usage: resume_worker FOLDER LOG_FILE MAX_BATCHES [WEIGHTS_FILE]\n";
    return 2;
  }
  const int64_t rank = dist::get_global_rank(), world = dist::get_world_size();
  const std::string folder = argv[1], log = std::string(argv[2]) + (rank > 0 ? ".rank" + std::to_string(rank) : "");
  std::cout << "pid " << ::getpid() << std::endl;
  const int64_t max_batches = std::atoll(argv[3]);
  torch::manual_seed(0);
  auto net = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Layer>>{
      std::make_shared<nn::Flatten>(), std::make_shared<nn::Linear>(64, 1024), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Dropout>(0.1), std::make_shared<nn::Linear>(1024, 1024), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Dropout>(0.1), std::make_shared<nn::Linear>(1024, 10)});
  auto model = ComposerClassifier::wrap(net);
  auto opt = std::make_shared<optim::DecoupledSGDW>(model->parameters(),
                                                    optim::DecoupledSGDWOptions(0.05).momentum(0.9).weight_decay(1e-4));
  auto data = std::make_shared<DatasetLoader>(
      synthetic_images(1024, 1, 8, 10, 3),
      DatasetLoaderOptions(32 / world).shuffle(true).seed(5).num_workers(2).num_replicas(world).rank(rank));
  TrainerOptions options =
      TrainerOptions(model)
          .run_name("resume")
          .seed(11)
          .device("cpu")
          .num_threads(1)
          .train_dataloader(data)
          .optimizer(opt)
          .schedulers({std::make_shared<CosineAnnealingWithWarmupScheduler>(Time::from_batch(4))})
          .max_duration(Time::from_batch(max_batches))
          .save_folder(folder)
          .save_interval("2ba")
          .save_num_checkpoints_to_keep(3)
          .autoresume(true)
          .progress_bar(false)
          .callbacks({std::make_shared<PrintBatch>()})
          .loggers({std::make_shared<FileLogger>(FileLoggerOptions().filename(log).flush_interval(1))});
  const char* save_async = std::getenv("RESUME_WORKER_SAVE_ASYNC");
  options.save_async(save_async != nullptr && std::string(save_async) == "1");
  Trainer trainer(options);
  trainer.fit();
  if (rank > 0) {
    trainer.close();
    std::cout << "DONE" << std::endl;
    return 0;
  }
  Dict weights(c10::StringType::get(), c10::TensorType::get());
  for (const auto& p : model->named_parameters()) weights.insert(p.key(), p.value());
  write_file_atomically(argc == 5 ? argv[4] : folder + "/final-weights.pt", torch::pickle_save(weights));
  std::cout << "DONE" << std::endl;
  return 0;
}
