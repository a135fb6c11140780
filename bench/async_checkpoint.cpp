// bench/async_checkpoint: the training stall per checkpoint with save_async against synchronous saves, for the
// GPT-2-124M-shaped state (model + DecoupledAdamW moments, ~1.5 GB), interleaved in one run.
//   async_checkpoint [--dir /tmp] [--rounds 2] [--batches 9]
// Every 2 batches a checkpoint is saved (the newest kept). The stall of a batch is the time from its BATCH_CHECKPOINT
// (before the saver runs) to the next batch's start; a save's stall is that of its batch less the median of the
// batches that do not save. Step time is batch start to batch end; the fit time includes waiting for the last write.
#include "composer/composer.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <vector>

using namespace composer;
using Clock = std::chrono::steady_clock;

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// Records, per batch, the step time and the gap from BATCH_CHECKPOINT to the next BATCH_START.
class StallClock : public Callback {
 public:
  void batch_start(State&, Logger&) override {
    const auto now = Clock::now();
    if (checkpoint_at_) gaps.push_back(std::chrono::duration<double>(now - *checkpoint_at_).count());
    checkpoint_at_.reset();
    start_ = now;
  }
  void batch_end(State&, Logger&) override {
    steps.push_back(std::chrono::duration<double>(Clock::now() - start_).count());
  }
  void batch_checkpoint(State&, Logger&) override { checkpoint_at_ = Clock::now(); }
  void fit_end(State&, Logger&) override {
    if (checkpoint_at_) gaps.push_back(std::chrono::duration<double>(Clock::now() - *checkpoint_at_).count());
  }
  std::vector<double> steps, gaps;

 private:
  Clock::time_point start_;
  std::optional<Clock::time_point> checkpoint_at_;
};

struct Result {
  double stall_s, step_s, fit_s;
};

Result run(bool async, const std::string& dir, int64_t batches) {
  torch::manual_seed(0);
  auto gpt = std::make_shared<models::GPT>(models::TransformerConfig().max_seq_len(64));  // GPT-2 124M's shapes
  auto model = std::make_shared<ComposerLanguageModel>(gpt);
  auto opt = std::make_shared<optim::DecoupledAdamW>(model->parameters(), optim::DecoupledAdamWOptions(1e-4));
  const at::Tensor ids = at::randint(50257, {2, 64}, at::TensorOptions().dtype(at::kLong));
  auto clock = std::make_shared<StallClock>();
  const std::string folder = dir + (async ? "/async" : "/sync");
  std::filesystem::remove_all(folder);
  Trainer trainer(TrainerOptions(model)
                      .train_dataloader(std::make_shared<TensorDataLoader>(Batch({{"input_ids", ids}, {"labels", ids}}),
                                                                           TensorDataLoaderOptions(2)))
                      .optimizer(opt)
                      .max_duration(Time::from_batch(batches))
                      .save_folder(folder)
                      .save_interval("2ba")
                      .save_num_checkpoints_to_keep(1)
                      .save_overwrite(true)
                      .save_async(async)
                      .callbacks({clock})
                      .progress_bar(false)
                      .loggers({})
                      .device("cpu")
                      .seed(0));
  const auto t = Clock::now();
  trainer.fit();
  const double fit_s = std::chrono::duration<double>(Clock::now() - t).count();
  trainer.close();
  std::filesystem::remove_all(folder);
  // Batches 2, 4, ... save (and the last one); the others give the baseline gap.
  std::vector<double> saving, plain;
  for (size_t i = 0; i < clock->gaps.size(); ++i)
    ((i + 1) % 2 == 0 || i + 1 == clock->gaps.size() ? saving : plain).push_back(clock->gaps[i]);
  return {median(saving) - median(plain), median(clock->steps), fit_s};
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = std::filesystem::temp_directory_path().string() + "/composer_async_checkpoint";
  int rounds = 2;
  int64_t batches = 9;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--dir")) dir = argv[i + 1];
    if (!std::strcmp(argv[i], "--rounds")) rounds = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--batches")) batches = std::atoll(argv[i + 1]);
  }
  configure_threads();
  std::vector<double> stall[2], step[2], fit[2];
  for (int r = 0; r < rounds; ++r) {
    for (const bool async : {false, true}) {  // interleaved
      const Result res = run(async, dir, batches);
      stall[async].push_back(res.stall_s);
      step[async].push_back(res.step_s);
      fit[async].push_back(res.fit_s);
      std::printf("round %d %s: stall per save %.3f s, median step %.3f s, fit %.2f s\n", r, async ? "async" : "sync",
                  res.stall_s, res.step_s, res.fit_s);
      std::fflush(stdout);
    }
  }
  std::filesystem::remove_all(dir);
  std::printf("| mode | stall per save s | median step s | fit s (%lld batches) |\n|---|---|---|---|\n",
              static_cast<long long>(batches));
  for (const bool async : {false, true})
    std::printf("| %s | %.3f | %.3f | %.2f |\n", async ? "save_async" : "synchronous", median(stall[async]),
                median(step[async]), median(fit[async]));
  std::printf("RESULT async_checkpoint stall_ratio=%.3f\n", median(stall[1]) / median(stall[0]));
  return 0;
}
