// Loading a run's checkpoint when it starts: autoresume from its own save folder, else load_path. Returns the resume
// point (what was loaded and the generator states) that the fit loop applies when training starts.
#pragma once

#include "composer/checkpoint/checkpoint.h"
#include "composer/checkpoint/checkpoint_saver.h"
#include "composer/core/fields.h"

#include <torch/arg.h>

#include <optional>
#include <string>
#include <vector>

namespace composer {

class Engine;
struct State;

/// What a run loads when it starts: Composer's Trainer arguments load_path, load_weights_only,
/// load_strict_model_weights, load_ignore_keys, load_exclude_algorithms and autoresume (the Trainer's keys put load_
/// in front of the first five).
struct LoadOptions {
  /// A checkpoint to start from when autoresume finds none ({run_name} allowed): a file or an object-store URI
  /// ("s3://bucket/run/ep1.pt", downloaded first); "" = none.
  TORCH_ARG(std::string, path);
  /// Load only the model weights from path.
  TORCH_ARG(bool, weights_only) = false;
  /// Every model key of path must match (names and shapes).
  TORCH_ARG(bool, strict_model_weights) = true;
  /// Globs over "/"-joined paths in path to skip ("state/optimizers", "state/model/fc.*", "rng").
  TORCH_ARG(std::vector<std::string>, ignore_keys);
  /// Algorithms a checkpoint requires (model surgery) that are not re-created from it, by class name.
  TORCH_ARG(std::vector<std::string>, exclude_algorithms);
  /// Resume from the newest readable checkpoint of this run in its save folder (needs an explicit run name).
  TORCH_ARG(bool, autoresume) = false;

 public:
  /// How path is applied (autoresume always loads everything).
  CheckpointLoadOptions apply_options() const;
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("path", self.path_, "checkpoint to start from ({run_name} allowed)");
    visit("weights_only", self.weights_only_, "load only the model weights");
    visit("strict_model_weights", self.strict_model_weights_, "every model key must match");
    visit("ignore_keys", self.ignore_keys_, "globs over checkpoint paths to skip ('state/optimizers')");
    visit("exclude_algorithms", self.exclude_algorithms_,
          "required algorithms (class names) not to re-create from the checkpoint");
    visit("autoresume", self.autoresume_, "resume from the newest complete checkpoint in save_folder");
  }
};

struct ResumeOptions {
  /// What to load.
  TORCH_ARG(LoadOptions, load);
  /// The run name as the user gave it ("" = generated; autoresume refuses a generated name).
  TORCH_ARG(std::string, requested_run_name);
  /// Where and under which names the run saves (format variables allowed), for autoresume's search.
  TORCH_ARG(CheckpointSaverOptions, save) = CheckpointSaverOptions().folder("");
};

/// What a run resumed from; restore() puts this rank's generator states back (the fit loop calls it at FIT_START,
/// after the Trainer's seeding, so a resumed run draws the numbers the interrupted one would have).
struct ResumePoint {
  /// The file loaded; "" when nothing was.
  std::string path;
  /// The checkpoint's "rng" entry (every rank's states), when it had one.
  std::optional<c10::IValue> rng;
  /// Restores this rank's generators from rng (nothing without one).
  void restore(int64_t rank) const;
};

/// load_path as Composer formats it: {run_name} filled, and {rank}, {local_rank} and {node_rank} as rank 0's (every
/// rank reads rank 0's file, as Composer's does); "{{" and "}}" are braces. Any other placeholder is a
/// std::invalid_argument naming it (Composer's KeyError).
std::string format_load_path(const std::string& pattern, const std::string& run_name);

/// Reads `path` (a checkpoint file, a sharded checkpoint folder, or an object-store URI, downloaded first; not yet
/// formatted) on every rank, each its part under FSDP, and applies it to `state` with `options`; every rank calls it
/// and every rank fails when one could not read it. Returns the checkpoint's "rng" entry. Throws CheckpointError
/// naming the path. The LoadCheckpoint callback's load.
std::optional<c10::IValue> load_checkpoint_path(State& state, const std::string& path,
                                                const CheckpointLoadOptions& options);

/// Runs between BEFORE_LOAD and AFTER_LOAD. Autoresume tries save_folder's checkpoints newest first (the latest
/// link's target, then by batch number), setting unreadable files aside as <name>.corrupt with a message; if none
/// loads it falls back to load_path. An object-store save folder is searched by listing it (every listed object is
/// complete; one that does not read is skipped with a message) and the pointer object "<latest_filename>.symlink";
/// the chosen checkpoint is downloaded to a temporary file. Algorithms a checkpoint requires (model surgery) that the
/// run lacks and does not exclude are re-created from the registry and join through engine.add_late_algorithms (INIT
/// for them alone) before it is applied. Throws CheckpointError naming the file when a checkpoint cannot be applied,
/// std::invalid_argument for autoresume without a run name.
ResumePoint load_for_run(State& state, Engine& engine, const ResumeOptions& options);

}  // namespace composer
