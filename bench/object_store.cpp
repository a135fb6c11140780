// bench/object_store: S3ObjectStore transfer times, and what a remote save folder costs a training run.
//   object_store transfer FILE SMALL_COUNT   (AWS_* variables name the server) uploads and downloads FILE once, then
//                                            SMALL_COUNT objects of 64 KiB; prints RESULT lines
//   object_store train FOLDER BATCHES        trains an MLP (8.4 MB checkpoints) for BATCHES batches, saving every
//                                            batch to FOLDER (local path or s3://...); prints the fit time
#include "composer/composer.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>

using namespace composer;
namespace fs = std::filesystem;

namespace {

/// The time of the last BATCH_END: training done, before FIT_END waits for the uploads.
class LastBatch : public Callback {
 public:
  void batch_end(State&, Logger&) override { at = std::chrono::steady_clock::now(); }
  std::chrono::steady_clock::time_point at;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int transfer(const std::string& file, int small_count) {
  S3ObjectStore store("bench");
  const double mib = static_cast<double>(fs::file_size(file)) / (1 << 20);
  auto t0 = std::chrono::steady_clock::now();
  store.upload_object("big.bin", file);
  const double up = seconds_since(t0);
  t0 = std::chrono::steady_clock::now();
  store.download_object("big.bin", file + ".back", true);
  const double down = seconds_since(t0);
  const std::string small = file + ".small";
  std::ofstream(small, std::ios::binary) << std::string(64 << 10, 'x');
  t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < small_count; ++i) store.upload_object("small/" + std::to_string(i), small);
  const double small_up = seconds_since(t0);
  t0 = std::chrono::steady_clock::now();
  const auto listed = store.list_objects("small/");
  const double list = seconds_since(t0);
  std::cout << "RESULT impl=cpp upload_mib_s=" << mib / up << " download_mib_s=" << mib / down
            << " small_put_ms=" << 1000 * small_up / small_count << " list_ms=" << 1000 * list
            << " listed=" << listed.size() << std::endl;
  return 0;
}

int train(const std::string& folder, int64_t batches) {
  torch::manual_seed(0);
  auto net = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Layer>>{
      std::make_shared<nn::Flatten>(), std::make_shared<nn::Linear>(64, 1024), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(1024, 1024), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(1024, 10)});
  auto model = ComposerClassifier::wrap(net);
  auto data = std::make_shared<DatasetLoader>(synthetic_images(4096, 1, 8, 10, 3), DatasetLoaderOptions(64).seed(5));
  TrainerOptions o(model);
  o.run_name("bench")
      .seed(1)
      .device("cpu")
      .progress_bar(false)
      .train_dataloader(data)
      .max_duration(Time::from_batch(batches))
      .optimizer(
          std::make_shared<optim::DecoupledSGDW>(model->parameters(), optim::DecoupledSGDWOptions(0.05).momentum(0.9)));
  if (folder != "none") o.save_folder(folder).save_interval("1ba").save_overwrite(true).save_num_checkpoints_to_keep(2);
  auto last = std::make_shared<LastBatch>();
  o.callbacks({last});
  Trainer trainer(o);
  const auto t0 = std::chrono::steady_clock::now();
  trainer.fit();  // FIT_END waits for the last uploads
  const double fit = seconds_since(t0), train = std::chrono::duration<double>(last->at - t0).count();
  std::cout << "RESULT mode="
            << (folder == "none"              ? "none"
                : is_object_store_uri(folder) ? "s3"
                                              : "local")
            << " batches=" << batches << " train_s=" << train << " fit_s=" << fit << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "transfer" && argc == 4) return transfer(argv[2], std::atoi(argv[3]));
  if (mode == "train" && argc == 4) return train(argv[2], std::atoll(argv[3]));
  std::cerr << "usage: object_store transfer FILE SMALL_COUNT | object_store train FOLDER BATCHES\n";
  return 2;
}
