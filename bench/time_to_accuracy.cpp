// bench/time_to_accuracy: wall time for the MNIST CNN to reach a test accuracy, through the Trainer.
// Mirrors bench/python/time_to_accuracy.py (same model, optimizer, schedule, batch order rules, eval cadence).
//   time_to_accuracy --data data/mnist --target 0.985 --max-epochs 3 [--eval-every 100] [--seed 17]
//                    [--algorithms weight_standardization,channels_last]   (names as in `composer-cpp list algorithms`)
//                    [--profile DIR --profile-batches N]
// --profile: the Trainer's own Profiler records N batches with Kineto (after 20 skipped and 5 of warm-up; record_shapes
// only, no memory or flops) into DIR, and the run stops there, without evaluation. bench/peers/step_profile.sh.
#include "composer/composer.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

int main(int argc, char** argv) {
  using namespace composer;
  std::string data = "data/mnist";
  double target = 0.985;
  int64_t max_epochs = 3, eval_every = 100, seed = 17, profile_batches = 30;
  int64_t workers = DatasetLoaderOptions(1).num_workers();  // the library's default unless --workers
  std::string profile_dir;
  std::string algorithm_names;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--data")
      data = argv[i + 1];
    else if (a == "--target")
      target = std::atof(argv[i + 1]);
    else if (a == "--max-epochs")
      max_epochs = std::atoll(argv[i + 1]);
    else if (a == "--eval-every")
      eval_every = std::atoll(argv[i + 1]);
    else if (a == "--seed")
      seed = std::atoll(argv[i + 1]);
    else if (a == "--workers")
      workers = std::atoll(argv[i + 1]);
    else if (a == "--algorithms")
      algorithm_names = argv[i + 1];
    else if (a == "--profile")
      profile_dir = argv[i + 1];
    else if (a == "--profile-batches")
      profile_batches = std::atoll(argv[i + 1]);
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  configure_threads();
  const bool fashion = data.find("fashion") != std::string::npos;
  const double mean = fashion ? 0.2860 : 0.1307, stdev = fashion ? 0.3530 : 0.3081;
  const auto normalize = make_image_transform(ImageTransformOptions().mean({mean}).std({stdev}));
  auto train = std::make_shared<DatasetLoader>(load_mnist(data, true), DatasetLoaderOptions(128)
                                                                           .shuffle(true)
                                                                           .seed(static_cast<uint64_t>(seed))
                                                                           .num_workers(workers)
                                                                           .transform(normalize));
  auto test = std::make_shared<DatasetLoader>(
      load_mnist(data, false), DatasetLoaderOptions(1000).shuffle(false).num_workers(workers).transform(normalize));
  torch::manual_seed(static_cast<uint64_t>(seed));
  auto model = ComposerClassifier::wrap(models::mnist_cnn(1, 10, 32));
  auto opt = std::make_shared<optim::DecoupledSGDW>(model->parameters(),
                                                    optim::DecoupledSGDWOptions(0.05).momentum(0.9).weight_decay(5e-4));
  std::vector<std::shared_ptr<Algorithm>> algos;
  for (size_t at = 0; at < algorithm_names.size();) {
    const size_t comma = std::min(algorithm_names.find(',', at), algorithm_names.size());
    algos.push_back(algorithms::make_algorithm(algorithm_names.substr(at, comma - at)));
    at = comma + 1;
  }
  std::shared_ptr<Profiler> profiler;
  if (!profile_dir.empty()) {
    constexpr int64_t kSkip = 20, kWarmup = 5;
    profiler = std::make_shared<Profiler>(
        std::vector<std::shared_ptr<TraceHandler>>{},
        ProfilerOptions()
            .schedule(CyclicScheduleOptions().skip_first(kSkip).wait(0).warmup(kWarmup).active(profile_batches))
            .sys_prof_cpu(false)
            .torch_prof_folder(profile_dir)
            .torch_prof_filename("ours.{batch}.pt.trace.json")
            .torch_prof_remote_file_name("")
            .torch_prof_overwrite(true)
            .torch_prof_record_shapes(true)
            .torch_prof_profile_memory(false)
            .torch_prof_with_flops(false));
    eval_every = 1000000;
    target = 2.0;  // never reached: the run ends at max_duration
  }
  const auto start = std::chrono::steady_clock::now();
  Trainer trainer(
      TrainerOptions(model)
          .profiler(profiler)
          .algorithms(algos)
          .train_dataloader(train)
          .eval_dataloader(test)
          .optimizer(opt)
          .schedulers({std::make_shared<CosineAnnealingWithWarmupScheduler>(Time::from_batch(100))})
          .max_duration(profiler ? Time::from_batch(20 + 5 + profile_batches) : Time::from_epoch(max_epochs))
          .eval_interval(Time::from_batch(eval_every))
          .progress_bar(false)
          .device("cpu")
          .precision(Precision::FP32)
          .seed(static_cast<uint64_t>(seed))
          .callbacks({std::make_shared<ThresholdStopper>("Accuracy", "eval", target)}));
  trainer.fit();
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const State& s = trainer.state();
  const double acc = s.eval_metric_values.at("Accuracy");
  std::printf(
      "RESULT time_to_accuracy impl=cpp data=%s target=%.4f reached=%d acc=%.4f batches=%lld train_s=%.2f total_s=%.2f "
      "threads=%d%s\n",
      fashion ? "fashion_mnist" : "mnist", target, acc >= target ? 1 : 0, acc,
      static_cast<long long>(s.timestamp.batch), s.timestamp.total_wct.count(), total, at::get_num_threads(),
      algorithm_names.empty() ? "" : (" algorithms=" + algorithm_names).c_str());
  return 0;
}
