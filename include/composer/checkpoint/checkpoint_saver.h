// CheckpointSaver: saves the whole State at an interval, crash-safely, with a "latest" link and retention.
#pragma once

#include "composer/core/callback.h"
#include "composer/core/fields.h"
#include "composer/core/interval.h"
#include "composer/core/time.h"

#include <torch/arg.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace composer {

class RemoteUploader;

struct CheckpointSaverOptions {
  /// Folder; format variables allowed ({run_name}, ...). An object-store URI ("s3://bucket/{run_name}/checkpoints")
  /// saves into a local temporary folder and uploads each checkpoint there in the background.
  TORCH_ARG(std::string, folder) = "{run_name}/checkpoints";
  /// File name inside the folder (see format_name for the variables).
  TORCH_ARG(std::string, filename) = "ep{epoch}-ba{batch}-rank{rank}.pt";
  /// A relative symbolic link to the newest complete checkpoint; empty = none.
  TORCH_ARG(std::string, latest_filename) = "latest-rank{rank}.pt";
  /// When to save (Composer's interval rules; a final checkpoint is always written).
  TORCH_ARG(Time, save_interval) = Time::from_epoch(1);
  /// Overrides save_interval when set: save when it returns true at a *_CHECKPOINT event.
  TORCH_ARG(IntervalScheduler, save_interval_fn);
  /// Replace existing files, and allow starting next to checkpoints from later in training.
  TORCH_ARG(bool, overwrite) = false;
  /// Keep the newest N checkpoints written by this saver (-1 = all). The newest is never deleted, except with 0 (an
  /// object-store folder only): no local copy stays once it is staged for upload, no local
  /// latest link is written, and the store keeps every checkpoint (Composer's meaning of 0).
  TORCH_ARG(int64_t, num_checkpoints_to_keep) = -1;
  TORCH_ARG(bool, weights_only) = false;
  /// Where each checkpoint is sent through Logger::upload_file to the destinations that upload files (MLflow's
  /// artifacts); format variables allowed. Empty: none. A failed upload is a warning: the file is safe on disk.
  TORCH_ARG(std::string, remote_file_name) = "{run_name}/checkpoints/ep{epoch}-ba{batch}-rank{rank}";
  /// Uploads running at once when folder is an object-store URI.
  TORCH_ARG(int64_t, num_concurrent_uploads) = 1;
  /// Write checkpoints in the background (torchtitan's async mode): at the save point the state is copied to host
  /// memory and training goes on while a thread writes it; at most one save is in flight (the next save waits).
  TORCH_ARG(bool, save_async) = false;

 public:
  /// Throws std::invalid_argument naming the bad field.
  void validate() const;
  /// The field list (core/fields.h); save_interval_fn is not a field. The Trainer's keys put save_ in front.
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("folder", self.folder_, "folder for checkpoints ({run_name} allowed); in the Trainer, empty: no saving");
    visit("filename", self.filename_, "checkpoint file name pattern");
    visit("latest_filename", self.latest_filename_, "link to the newest checkpoint; empty: none");
    visit("save_interval", ensure_time(TimeUnit::EPOCH, self.save_interval_),
          "how often to save; a bare integer is epochs");
    visit("overwrite", self.overwrite_, "replace existing checkpoints");
    visit("weights_only", self.weights_only_, "save only the model weights");
    visit("num_checkpoints_to_keep", self.num_checkpoints_to_keep_,
          "newest checkpoints kept; -1: all; 0: none locally (uploads)");
    visit("remote_file_name", self.remote_file_name_, "name each checkpoint is uploaded under; empty: none");
    visit("num_concurrent_uploads", self.num_concurrent_uploads_, "uploads at once to an object-store folder");
    visit("save_async", self.save_async_, "write checkpoints on a background thread from a host copy of the state");
  }
};

/// The names among `names` that match `filename_pattern` (as find_checkpoints reads them), with their numbers,
/// newest first.
std::vector<std::pair<int64_t, std::string>> match_checkpoint_names(const std::vector<std::string>& names,
                                                                    const std::string& filename_pattern,
                                                                    const State& state);
/// Checkpoint files in `folder` whose names match `filename_pattern` (its {batch} or else {epoch} read back as a
/// number; other variables filled from `state`), newest first. Patterns with neither variable match nothing.
std::vector<std::pair<int64_t, std::string>> find_checkpoints(const std::string& folder,
                                                              const std::string& filename_pattern, const State& state);

/// Saves at BATCH_CHECKPOINT / EPOCH_CHECKPOINT / ITERATION_CHECKPOINT when due (rank 0 only). Each file is written
/// to a temporary name, fsynced and renamed; the latest link moves only after that; older checkpoints are deleted
/// only after the new one is complete. At FIT_START, without overwrite, checkpoints from later in training in the
/// folder are an error (they would be mixed with this run's).
///
/// With save_async, the save point copies the state (this rank's part of a sharded checkpoint) to host memory and a
/// background thread writes it by the same rules: a one-file checkpoint's latest link moves once its file is
/// complete; a sharded checkpoint's .metadata (and its link) are written when the ranks next meet, at the next save
/// or at FIT_END, after every rank's file is complete. Retention, uploads and the checkpoint/batch metric follow
/// once the files are complete; an error from the background surfaces at the next save or at FIT_END.
///
/// With an object-store folder (Composer's remote save_folder) each checkpoint is written locally as above and then
/// uploaded in the background (storage/remote_uploader.h): the "<latest_filename>.symlink" pointer object, holding
/// the checkpoint's key, goes up only after the checkpoint object is complete, and retention deletes remote
/// checkpoints only after that. A failed upload stops the run at the next batch with the error; at FIT_END the run
/// waits for pending uploads and reports what it uploaded.
class CheckpointSaver : public Callback {
 public:
  explicit CheckpointSaver(CheckpointSaverOptions options = CheckpointSaverOptions());
  ~CheckpointSaver() override;
  void fit_start(State& state, Logger& logger) override;
  void batch_end(State& state, Logger& logger) override;
  void fit_end(State& state, Logger& logger) override;
  void batch_checkpoint(State& state, Logger& logger) override;
  void epoch_checkpoint(State& state, Logger& logger) override;
  void iteration_checkpoint(State& state, Logger& logger) override;
  /// Whether save_interval is due at `event` and this batch is not saved yet.
  bool will_save_checkpoint(const State& state, Event event) const override;
  c10::IValue state_dict() const override;
  void load_state_dict(const c10::IValue& state) override;

  /// Paths of the checkpoints this run has written and kept, oldest first.
  const std::vector<std::string>& saved_checkpoints() const { return saved_; }
  const CheckpointSaverOptions& options() const { return options_; }
  /// The local folder with format variables filled in (a temporary folder's subfolder for an object-store folder).
  std::string folder(const State& state) const;
  /// The object-store folder's path inside its bucket, formatted ("run/checkpoints"); "" for a local folder.
  std::string remote_folder(const State& state) const;
  /// The uploader of an object-store folder (rank 0, from FIT_START on); nullptr otherwise.
  RemoteUploader* remote_uploader() const { return uploader_.get(); }

 private:
  void maybe_save(State& state, Logger& logger, Event event);
  void save(State& state, Logger& logger);
  /// Rank 0's part of save(): the file, the latest link, retention.
  void write(State& state, Logger& logger, const std::optional<c10::IValue>& rng);
  /// A checkpoint's files are complete (written, or a background write finished): its link (sharded: after the
  /// .metadata), uploads, retention, the checkpoint/batch metric. Rank 0.
  struct Written;
  Written written_of(const State& state, const std::string& path, bool sharded) const;
  void complete(const Written& written, Logger& logger);
  /// save_async: waits for the save in flight and completes it (sharded: every rank, a collective).
  void finish_pending(Logger& logger);
  // FSDP's state_dict_type "sharded": every rank writes its file into the checkpoint's directory.
  void write_sharded(State& state, Logger& logger, const std::optional<c10::IValue>& rng, const std::string& prefix);
  // What this run's checkpoints are named by: save_filename, or FSDP's sharded_ckpt_prefix_dir for sharded ones.
  std::string checkpoint_pattern(const State& state) const;
  /// Queues the checkpoint's upload, then its pointer object (after it) to the object-store folder.
  void upload(const std::string& remote_prefix, const std::string& latest_name, const std::string& path);
  /// Without overwrite: checkpoints from later in training in the object-store folder are an error.
  void check_remote_folder(const State& state);
  CheckpointSaverOptions options_;
  IntervalScheduler due_;
  int64_t last_saved_batch_ = -1;
  std::vector<std::string> saved_;
  /// For an object-store folder: the local temporary root, and the uploader (rank 0).
  std::string local_root_;
  std::unique_ptr<RemoteUploader> uploader_;
  int64_t pointer_count_ = 0;
  std::string last_key_;
  /// save_async: the save whose files a background thread writes.
  struct Pending;
  std::unique_ptr<Pending> pending_;
};

}  // namespace composer
