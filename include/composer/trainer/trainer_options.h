// TrainerOptions: everything the Trainer is built from. Defaults are Composer's.
#pragma once

#include "composer/core/engine.h"
#include "composer/core/evaluator.h"
#include "composer/core/fields.h"
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

class Hparams;
/// As a field (core/fields.h): None (the whole batch), 'auto' or the number; read with MicrobatchSize::parse.
std::string field_text(const MicrobatchSize& m);
void read_field(Hparams& h, const std::string& key, MicrobatchSize& m);

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
  /// Log the options as hyperparameters (Composer's auto_log_hparams): every field below plus the reprs of the
  /// algorithms and schedulers and the class names of the other objects.
  TORCH_ARG(bool, auto_log_hparams) = false;
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

  /// The field list of the settings a config can give (core/fields.h): the CLI's top-level keys, the
  /// hyperparameters the Trainer logs, and the table in docs/cli.md. The model, data, optimizer, schedulers,
  /// algorithms, callbacks, loggers and evaluators are objects, not fields.
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("run_name", self.run_name_,
          "name used in {run_name} paths; unset: $COMPOSER_RUN_NAME, $RUN_NAME, else generated");
    visit("seed", self.seed_, "rank-zero seed (each rank seeds with seed + rank); unset: drawn on rank 0");
    visit("max_duration", ensure_time(TimeUnit::EPOCH, self.max_duration_),
          "how long to train; a bare integer is epochs");
    visit("iteration_length", ensure_time(TimeUnit::EPOCH, self.iteration_length_),
          "epochs or tokens per iteration; unset: one endless iteration");
    visit("train_dataloader_label", self.train_dataloader_label_, "label of the training data in metric keys");
    visit("train_subset_num_batches", self.train_subset_num_batches_, "batches per training epoch; -1: all");
    visit("scale_schedule_ratio", self.scale_schedule_ratio_, "scales max_duration and the schedules");
    visit("step_schedulers_every_batch", self.step_schedulers_every_batch_,
          "step schedulers every batch, else every epoch");
    visit("eval_interval", ensure_time(TimeUnit::EPOCH, self.eval_interval_),
          "how often to evaluate; a bare integer is epochs");
    visit("eval_subset_num_batches", self.eval_subset_num_batches_, "batches per evaluation; -1: all");
    visit("progress_bar", self.progress_bar_, "a progress bar on a TTY, plain lines otherwise");
    visit("log_to_console", self.log_to_console_, "add a ConsoleLogger");
    visit("console_log_interval", ensure_time(TimeUnit::BATCH, self.console_log_interval_),
          "how often the console logs; a bare integer is batches");
    visit("log_traces", self.log_traces_, "log algorithm_traces/<Cls>/Event.<NAME> for every algorithm run");
    visit("device", self.device_, "cpu, cuda or cuda:N; unset: cuda:<local rank> when available, else cpu");
    visit("precision", self.precision_, "fp32, amp_fp16 or amp_bf16; unset: amp_fp16 on CUDA, fp32 on CPU");
    visit("device_train_microbatch_size", self.device_train_microbatch_size_,
          "samples per microbatch, or auto; unset: the whole batch");
    visit("deterministic_mode", self.deterministic_mode_, "torch deterministic algorithms");
    visit("num_threads", self.num_threads_, "intra-op threads; 0: $OMP_NUM_THREADS, else the cores");
    visit("tune_allocator", self.tune_allocator_, "keep freed tensor memory in the process");
    visit("save_folder", self.save_folder_, "folder for checkpoints ({run_name} allowed); empty: no saving");
    visit("save_filename", self.save_filename_, "checkpoint file name pattern");
    visit("save_latest_filename", self.save_latest_filename_, "link to the newest checkpoint");
    visit("save_interval", ensure_time(TimeUnit::EPOCH, self.save_interval_),
          "how often to save; a bare integer is epochs");
    visit("save_overwrite", self.save_overwrite_, "replace existing checkpoints");
    visit("save_weights_only", self.save_weights_only_, "save only the model weights");
    visit("save_num_checkpoints_to_keep", self.save_num_checkpoints_to_keep_, "newest checkpoints kept; -1: all");
    visit("load_path", self.load_path_, "checkpoint to start from ({run_name} allowed)");
    visit("load_weights_only", self.load_weights_only_, "load only the model weights");
    visit("load_strict_model_weights", self.load_strict_model_weights_, "every model key must match");
    visit("load_ignore_keys", self.load_ignore_keys_, "globs over checkpoint paths to skip ('state/optimizers')");
    visit("dist_timeout", self.dist_timeout_, "seconds a rank waits for its peers");
    visit("autoresume", self.autoresume_, "resume from the newest complete checkpoint in save_folder");
    visit("auto_log_hparams", self.auto_log_hparams_, "log these options as hyperparameters");
  }
};

}  // namespace composer
