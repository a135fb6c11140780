// TrainerOptions: everything the Trainer is built from. Defaults are Composer's.
#pragma once

#include "composer/checkpoint/checkpoint_saver.h"
#include "composer/checkpoint/resume.h"
#include "composer/core/engine.h"
#include "composer/core/evaluator.h"
#include "composer/core/fields.h"
#include "composer/core/precision.h"
#include "composer/core/time.h"
#include "composer/data/data_loader.h"
#include "composer/dist/parallelism_config.h"
#include "composer/trainer/eval_loop.h"
#include "composer/trainer/fit_loop.h"
#include "composer/trainer/train_epoch_loop.h"
#include "composer/trainer/train_step.h"

#include <torch/arg.h>

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace torch::optim {
class Optimizer;
}

namespace composer {

class Algorithm;
class Callback;
class ComposerModel;
class ComposerScheduler;
class LoggerDestination;
class Profiler;

/// Samples per microbatch: a number, the whole batch (unset), "auto" (start at the whole batch, halve when memory
/// runs out on CUDA or the CPU; TrainStep::run), or a fraction (Composer's float size, 0.5: half a sample per
/// microbatch) for a loader whose split_batch splits samples (DataLoader::split_batch, data/data_spec.h).
struct MicrobatchSize {
  MicrobatchSize() = default;
  MicrobatchSize(int64_t samples) : value(samples) {}  // NOLINT: implicit like Composer's int argument
  static MicrobatchSize automatic() {
    MicrobatchSize m;
    m.is_auto = true;
    return m;
  }
  /// A size that is not a whole number of samples; requires 0 < samples and a finite value.
  static MicrobatchSize fraction(double samples);
  /// Parses "auto", a positive integer or a positive number ("0.5"; a whole one, "4.0", is the integer); throws
  /// std::invalid_argument naming the input.
  static MicrobatchSize parse(const std::string& text);
  int64_t value = 0;  // 0 = the whole batch
  bool is_auto = false;
  double fractional = 0;  // > 0: a size that is not a whole number (value is then 0)
};

class Hparams;
/// As a field (core/fields.h): None (the whole batch), 'auto' or the number; read with MicrobatchSize::parse.
std::string field_text(const MicrobatchSize& m);
void read_field(Hparams& h, const std::string& key, MicrobatchSize& m);

// A setter and getter under Composer's Trainer argument name for a field of one of TrainerOptions' sub-structs, so
// that TrainerOptions(model).save_folder("ckpt") reads as Composer's Trainer(save_folder="ckpt").
#define COMPOSER_TRAINER_FORWARD(T, name, group, field) \
 public:                                                \
  TrainerOptions& name(const T& value) {                \
    group##_.field(value);                              \
    return *this;                                       \
  }                                                     \
  const T& name() const noexcept { return group##_.field(); }

/// The Trainer's options: the objects it trains with, its own settings, and one sub-struct per unit it composes
/// (fit(), train_epoch(), eval(): the loops' options; save(), load(): the checkpoint module's). Every setting also has
/// a setter under Composer's Trainer argument name (eval_interval, save_folder, load_path, ...).
struct TrainerOptions {
  explicit TrainerOptions(std::shared_ptr<ComposerModel> model) : model_(std::move(model)) {}

  // The objects.
  /// The model to train (required).
  TORCH_ARG(std::shared_ptr<ComposerModel>, model);
  /// Training data (Trainer::fit() takes no loader: set it here).
  TORCH_ARG(std::shared_ptr<DataLoader>, train_dataloader);
  TORCH_ARG(std::vector<std::shared_ptr<Algorithm>>, algorithms);
  /// Extra passes that reorder the algorithms matched at an event (run after the built-in ones).
  TORCH_ARG(std::vector<AlgorithmPass>, algorithm_passes);
  /// Defaults to DecoupledSGDW(lr=0.1) over the model's parameters, built after INIT.
  TORCH_ARG(std::shared_ptr<torch::optim::Optimizer>, optimizer);
  TORCH_ARG(std::vector<std::shared_ptr<ComposerScheduler>>, schedulers);
  /// Evaluation sets. A plain loader given with eval_dataloader() becomes Evaluator{label "eval"}.
  TORCH_ARG(std::vector<Evaluator>, evaluators);
  /// Callbacks, run after algorithms and before logger destinations.
  TORCH_ARG(std::vector<std::shared_ptr<Callback>>, callbacks);
  /// Logger destinations (they are callbacks too).
  TORCH_ARG(std::vector<std::shared_ptr<LoggerDestination>>, loggers);
  /// The profiler (profiler/profiler.h): its markers, system and Kineto profilers and trace handlers; unset: none.
  TORCH_ARG(std::shared_ptr<Profiler>, profiler);

  // The units' options.
  /// The fit loop's: the training loader's label and batches per epoch.
  TORCH_ARG(FitLoopOptions, fit);
  /// The train-epoch loop's: scheduler stepping and scale_schedule_ratio (which also scales max_duration).
  TORCH_ARG(TrainEpochLoopOptions, train_epoch);
  /// The train step's: cuda_graph and its warm-up steps.
  TORCH_ARG(TrainStepOptions, train_step);
  /// The eval loop's: eval_interval and batches per evaluation.
  TORCH_ARG(EvalLoopOptions, eval);
  /// The CheckpointSaver's, added after the other callbacks when its folder is set (format variables allowed,
  /// "runs/{run_name}/checkpoints"). Empty folder = no saving.
  TORCH_ARG(CheckpointSaverOptions, save) = CheckpointSaverOptions().folder("");
  /// What to load at the start: load_path, weights-only or strict loading, ignored keys, autoresume.
  TORCH_ARG(LoadOptions, load);

  // The Trainer's own settings.
  /// How long to train (ep, ba, sp, tok, iter; not dur or sec). In iter it needs iteration_length.
  TORCH_ARG(std::optional<Time>, max_duration);
  /// The length of one iteration, in ep or tok (Composer's State._iteration_length): ITERATION_END and
  /// ITERATION_CHECKPOINT fire after that many epochs (after EPOCH_CHECKPOINT) or tokens (after BATCH_CHECKPOINT).
  /// Unset: iterations never end, so max_duration cannot be in iter.
  TORCH_ARG(std::optional<Time>, iteration_length);
  /// Unset: $COMPOSER_RUN_NAME, $RUN_NAME, else "<unix time>-<adjective>-<noun>".
  TORCH_ARG(std::string, run_name);
  /// A progress bar on a TTY; plain periodic lines otherwise.
  TORCH_ARG(bool, progress_bar) = true;
  /// Add a ConsoleLogger.
  TORCH_ARG(bool, log_to_console) = false;
  TORCH_ARG(Time, console_log_interval) = Time::from_batch(1);
  /// Log algorithm_traces/<Cls>/Event.<NAME> (Composer's key) for every algorithm run.
  TORCH_ARG(bool, log_traces) = false;
  /// "cpu", "cuda", "cuda:N"; empty = cuda:<local rank> when CUDA is available, else cpu.
  TORCH_ARG(std::string, device);
  /// Unset: amp_fp16 on CUDA, fp32 on CPU.
  TORCH_ARG(std::optional<Precision>, precision);
  TORCH_ARG(MicrobatchSize, device_train_microbatch_size);
  /// Unset: random in [0, 2^32-1]. Each rank seeds with seed + rank (a tensor-parallel group's ranks with seed +
  /// their data-parallel rank, so that they draw the same dropout masks).
  TORCH_ARG(std::optional<uint64_t>, seed);
  /// torch deterministic algorithms on.
  TORCH_ARG(bool, deterministic_mode) = false;
  /// Intra-op threads; 0 = $OMP_NUM_THREADS, else all cores (divided among ranks on a node).
  TORCH_ARG(int, num_threads) = 0;
  /// Keep freed tensor memory in the process (glibc malloc thresholds, utils/allocator.h; large CPU blocks cached,
  /// utils/cpu_block_cache.h). Off: glibc defaults and LibTorch's own CPU allocator.
  TORCH_ARG(bool, tune_allocator) = true;
  /// Seconds a rank waits for its peers (rendezvous and collectives) before failing with a message.
  TORCH_ARG(double, dist_timeout) = 300.0;
  /// Log the options as hyperparameters (Composer's auto_log_hparams): every field below plus the reprs of the
  /// algorithms and schedulers and the class names of the other objects.
  TORCH_ARG(bool, auto_log_hparams) = false;
  /// Composer's parallelism_config: {fsdp: FSDPOptions} trains sharded (dist/parallelism_config.h); unset: DDP when
  /// the world size is above 1.
  TORCH_ARG(dist::ParallelismConfig, parallelism_config);

  // Composer's names for the sub-structs' fields.
  COMPOSER_TRAINER_FORWARD(std::string, train_dataloader_label, fit, train_dataloader_label)
  COMPOSER_TRAINER_FORWARD(int64_t, train_subset_num_batches, fit, train_subset_num_batches)
  COMPOSER_TRAINER_FORWARD(double, scale_schedule_ratio, train_epoch, scale_schedule_ratio)
  COMPOSER_TRAINER_FORWARD(bool, step_schedulers_every_batch, train_epoch, step_schedulers_every_batch)
  COMPOSER_TRAINER_FORWARD(bool, cuda_graph, train_step, cuda_graph)
  COMPOSER_TRAINER_FORWARD(int64_t, cuda_graph_warmup_steps, train_step, cuda_graph_warmup_steps)
  COMPOSER_TRAINER_FORWARD(bool, accumulate_train_batch_on_tokens, train_step, accumulate_train_batch_on_tokens)
  COMPOSER_TRAINER_FORWARD(Time, eval_interval, eval, eval_interval)
  COMPOSER_TRAINER_FORWARD(int64_t, eval_subset_num_batches, eval, subset_num_batches)
  COMPOSER_TRAINER_FORWARD(std::string, save_folder, save, folder)
  COMPOSER_TRAINER_FORWARD(std::string, save_filename, save, filename)
  COMPOSER_TRAINER_FORWARD(std::string, save_latest_filename, save, latest_filename)
  COMPOSER_TRAINER_FORWARD(Time, save_interval, save, save_interval)
  COMPOSER_TRAINER_FORWARD(bool, save_overwrite, save, overwrite)
  COMPOSER_TRAINER_FORWARD(bool, save_weights_only, save, weights_only)
  COMPOSER_TRAINER_FORWARD(int64_t, save_num_checkpoints_to_keep, save, num_checkpoints_to_keep)
  COMPOSER_TRAINER_FORWARD(std::string, save_remote_file_name, save, remote_file_name)
  COMPOSER_TRAINER_FORWARD(int64_t, save_num_concurrent_uploads, save, num_concurrent_uploads)
  COMPOSER_TRAINER_FORWARD(bool, save_async, save, save_async)
  COMPOSER_TRAINER_FORWARD(std::string, load_path, load, path)
  COMPOSER_TRAINER_FORWARD(bool, load_weights_only, load, weights_only)
  COMPOSER_TRAINER_FORWARD(bool, load_strict_model_weights, load, strict_model_weights)
  COMPOSER_TRAINER_FORWARD(std::vector<std::string>, load_ignore_keys, load, ignore_keys)
  COMPOSER_TRAINER_FORWARD(std::vector<std::string>, load_exclude_algorithms, load, exclude_algorithms)
  COMPOSER_TRAINER_FORWARD(bool, autoresume, load, autoresume)

 public:
  TrainerOptions& max_duration(const std::string& text);
  TrainerOptions& max_duration(const char* text) { return max_duration(std::string(text)); }
  TrainerOptions& eval_interval(const std::string& text);
  TrainerOptions& eval_interval(const char* text) { return eval_interval(std::string(text)); }
  TrainerOptions& save_interval(const std::string& text);
  TrainerOptions& save_interval(const char* text) { return save_interval(std::string(text)); }
  /// Adds Evaluator{label "eval", loader}.
  TrainerOptions& eval_dataloader(std::shared_ptr<DataLoader> loader);
  /// Throws std::invalid_argument naming the first bad field.
  void validate() const;

  /// The sub-structs' keys as Composer's Trainer spells them.
  static constexpr std::array<std::pair<const char*, const char*>, 1> kEvalKeys{{
      {"subset_num_batches", "eval_subset_num_batches"},
  }};
  static constexpr std::array<std::pair<const char*, const char*>, 8> kSaveKeys{{
      {"folder", "save_folder"},
      {"filename", "save_filename"},
      {"latest_filename", "save_latest_filename"},
      {"overwrite", "save_overwrite"},
      {"weights_only", "save_weights_only"},
      {"num_checkpoints_to_keep", "save_num_checkpoints_to_keep"},
      {"remote_file_name", "save_remote_file_name"},
      {"num_concurrent_uploads", "save_num_concurrent_uploads"},
  }};
  static constexpr std::array<std::pair<const char*, const char*>, 5> kLoadKeys{{
      {"path", "load_path"},
      {"weights_only", "load_weights_only"},
      {"strict_model_weights", "load_strict_model_weights"},
      {"ignore_keys", "load_ignore_keys"},
      {"exclude_algorithms", "load_exclude_algorithms"},
  }};

  /// The field list of the settings a config can give (core/fields.h), flat under Composer's Trainer names: the
  /// Trainer's own and, through renamed(), the sub-structs' own lists. It gives the CLI's top-level keys, the
  /// hyperparameters the Trainer logs, and the table in docs/cli.md. The model, data, optimizer, schedulers,
  /// algorithms, callbacks, loggers and evaluators are objects, not fields.
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("run_name", self.run_name_,
          "name used in {run_name} paths; unset: $COMPOSER_RUN_NAME, $RUN_NAME, else generated");
    visit("seed", self.seed_,
          "rank-zero seed (each rank seeds with seed + rank; a tensor-parallel group with its data-parallel rank's); "
          "unset: drawn on rank 0");
    visit("max_duration", ensure_time(TimeUnit::EPOCH, self.max_duration_),
          "how long to train; a bare integer is epochs");
    visit("iteration_length", ensure_time(TimeUnit::EPOCH, self.iteration_length_),
          "epochs or tokens per iteration; unset: one endless iteration");
    FitLoopOptions::for_each_field(self.fit_, visit);
    TrainEpochLoopOptions::for_each_field(self.train_epoch_, visit);
    EvalLoopOptions::for_each_field(self.eval_, renamed(visit, kEvalKeys));
    visit("progress_bar", self.progress_bar_, "a progress bar on a TTY, plain lines otherwise");
    visit("log_to_console", self.log_to_console_, "add a ConsoleLogger");
    visit("console_log_interval", ensure_time(TimeUnit::BATCH, self.console_log_interval_),
          "how often the console logs; a bare integer is batches");
    visit("log_traces", self.log_traces_, "log algorithm_traces/<Cls>/Event.<NAME> for every algorithm run");
    visit("device", self.device_, "cpu, cuda or cuda:N; unset: cuda:<local rank> when available, else cpu");
    visit("precision", self.precision_, "fp32, amp_fp16 or amp_bf16; unset: amp_fp16 on CUDA, fp32 on CPU");
    visit("device_train_microbatch_size", self.device_train_microbatch_size_,
          "samples per microbatch, or auto; unset: the whole batch");
    TrainStepOptions::for_each_field(self.train_step_, visit);
    visit("deterministic_mode", self.deterministic_mode_, "torch deterministic algorithms");
    visit("num_threads", self.num_threads_, "intra-op threads; 0: $OMP_NUM_THREADS, else the cores");
    visit("tune_allocator", self.tune_allocator_,
          "keep freed tensor memory in the process (glibc thresholds, the cache of CPU blocks >= 64 MiB)");
    CheckpointSaverOptions::for_each_field(self.save_, renamed(visit, kSaveKeys));
    LoadOptions::for_each_field(self.load_, renamed(visit, kLoadKeys));
    visit("dist_timeout", self.dist_timeout_, "seconds a rank waits for its peers");
    visit("auto_log_hparams", self.auto_log_hparams_, "log these options as hyperparameters");
  }
};

#undef COMPOSER_TRAINER_FORWARD

}  // namespace composer
