// TrainerOptions: everything the Trainer is built from. Defaults are Composer's.
#pragma once

#include "composer/core/engine.h"
#include "composer/core/evaluator.h"
#include "composer/core/precision.h"
#include "composer/core/time.h"
#include "composer/data/data_loader.h"

#include <torch/arg.h>

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

/// Samples per microbatch: a number, the whole batch (unset), or "auto" (searched on CUDA out-of-memory).
struct MicrobatchSize {
  MicrobatchSize() = default;
  MicrobatchSize(int64_t samples) : value(samples) {}  // NOLINT: implicit like Composer's int argument
  static MicrobatchSize automatic() {
    MicrobatchSize m;
    m.is_auto = true;
    return m;
  }
  /// Parses "auto" or a positive integer; throws std::invalid_argument naming the input.
  static MicrobatchSize parse(const std::string& text);
  int64_t value = 0;  // 0 = the whole batch
  bool is_auto = false;
};

struct TrainerOptions {
  explicit TrainerOptions(std::shared_ptr<ComposerModel> model) : model_(std::move(model)) {}

  /// The model to train (required).
  TORCH_ARG(std::shared_ptr<ComposerModel>, model);
  /// Training data (Trainer::fit() takes no loader: set it here).
  TORCH_ARG(std::shared_ptr<DataLoader>, train_dataloader);
  TORCH_ARG(std::string, train_dataloader_label) = "train";
  /// Batches per training epoch; -1 = the whole loader.
  TORCH_ARG(int64_t, train_subset_num_batches) = -1;
  /// How long to train (ep, ba, sp, tok, iter; not dur or sec). In iter it needs iteration_length.
  TORCH_ARG(std::optional<Time>, max_duration);
  /// The length of one iteration, in ep or tok (Composer's State._iteration_length): ITERATION_END and
  /// ITERATION_CHECKPOINT fire after that many epochs (after EPOCH_CHECKPOINT) or tokens (after BATCH_CHECKPOINT).
  /// Unset: iterations never end, so max_duration cannot be in iter.
  TORCH_ARG(std::optional<Time>, iteration_length);
  TORCH_ARG(std::vector<std::shared_ptr<Algorithm>>, algorithms);
  /// Extra passes that reorder the algorithms matched at an event (run after the built-in ones).
  TORCH_ARG(std::vector<AlgorithmPass>, algorithm_passes);
  /// Defaults to DecoupledSGDW(lr=0.1) over the model's parameters, built after INIT.
  TORCH_ARG(std::shared_ptr<torch::optim::Optimizer>, optimizer);
  TORCH_ARG(std::vector<std::shared_ptr<ComposerScheduler>>, schedulers);
  /// Scales max_duration and the schedules (Composer's scale_schedule_ratio).
  TORCH_ARG(double, scale_schedule_ratio) = 1.0;
  /// Step schedulers after every batch (true) or every epoch (false).
  TORCH_ARG(bool, step_schedulers_every_batch) = true;
  /// Evaluation sets. A plain loader given with eval_dataloader() becomes Evaluator{label "eval"}.
  TORCH_ARG(std::vector<Evaluator>, evaluators);
  /// When evaluators without their own interval run during fit (an int is epochs).
  TORCH_ARG(Time, eval_interval) = Time::from_epoch(1);
  /// Batches per evaluation; -1 = the whole loader.
  TORCH_ARG(int64_t, eval_subset_num_batches) = -1;
  /// Callbacks, run after algorithms and before logger destinations.
  TORCH_ARG(std::vector<std::shared_ptr<Callback>>, callbacks);
  /// Logger destinations (they are callbacks too).
  TORCH_ARG(std::vector<std::shared_ptr<LoggerDestination>>, loggers);
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
  /// Unset: random in [0, 2^32-1]. Each rank seeds with seed + rank.
  TORCH_ARG(std::optional<uint64_t>, seed);
  /// torch deterministic algorithms on.
  TORCH_ARG(bool, deterministic_mode) = false;
  /// Intra-op threads; 0 = $OMP_NUM_THREADS, else all cores (divided among ranks on a node).
  TORCH_ARG(int, num_threads) = 0;
  /// Keep freed tensor memory in the process (glibc malloc thresholds; see utils/allocator.h). Off: glibc defaults.
  TORCH_ARG(bool, tune_allocator) = true;

  // Checkpoints (a CheckpointSaver is added after the other callbacks when save_folder is set).
  /// Folder for checkpoints; format variables allowed ("runs/{run_name}/checkpoints"). Empty = no saving.
  TORCH_ARG(std::string, save_folder);
  TORCH_ARG(std::string, save_filename) = "ep{epoch}-ba{batch}-rank{rank}.pt";
  TORCH_ARG(std::string, save_latest_filename) = "latest-rank{rank}.pt";
  TORCH_ARG(Time, save_interval) = Time::from_epoch(1);
  TORCH_ARG(bool, save_overwrite) = false;
  TORCH_ARG(bool, save_weights_only) = false;
  TORCH_ARG(int64_t, save_num_checkpoints_to_keep) = -1;
  /// A checkpoint to start from (another run's, to fine-tune); {run_name} allowed.
  TORCH_ARG(std::string, load_path);
  TORCH_ARG(bool, load_weights_only) = false;
  TORCH_ARG(bool, load_strict_model_weights) = true;
  /// Globs over "/"-joined checkpoint paths to skip when loading ("state/optimizers", "state/model/fc.*").
  TORCH_ARG(std::vector<std::string>, load_ignore_keys);
  /// Seconds a rank waits for its peers (rendezvous and collectives) before failing with a message.
  TORCH_ARG(double, dist_timeout) = 300.0;
  /// Resume from the newest complete checkpoint in save_folder (needs save_folder and an explicit run_name);
  /// unreadable ones are set aside as <name>.corrupt and the next older one is used.
  TORCH_ARG(bool, autoresume) = false;

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
};

}  // namespace composer
