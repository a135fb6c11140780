// Loading a run's checkpoint when it starts: autoresume from its own save folder, else load_path. Returns the resume
// point (what was loaded and the generator states) that the fit loop applies when training starts.
#pragma once

#include "composer/checkpoint/checkpoint.h"

#include <torch/arg.h>

#include <optional>
#include <string>

namespace composer {

class Logger;
struct State;

struct ResumeOptions {
  /// Resume from the newest readable checkpoint of this run in save_folder (needs an explicit run name).
  TORCH_ARG(bool, autoresume) = false;
  /// The run name as the user gave it ("" = generated; autoresume refuses a generated name).
  TORCH_ARG(std::string, requested_run_name);
  /// Where and under which names the run saves (format variables allowed), for autoresume's search.
  TORCH_ARG(std::string, save_folder);
  TORCH_ARG(std::string, save_filename) = "ep{epoch}-ba{batch}-rank{rank}.pt";
  TORCH_ARG(std::string, save_latest_filename) = "latest-rank{rank}.pt";
  /// A checkpoint to start from when autoresume finds none ({run_name} allowed); "" = none.
  TORCH_ARG(std::string, load_path);
  /// How load_path is applied (autoresume always loads everything).
  TORCH_ARG(CheckpointLoadOptions, load);
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

/// Runs between BEFORE_LOAD and AFTER_LOAD. Autoresume tries save_folder's checkpoints newest first (the latest
/// link's target, then by batch number), setting unreadable files aside as <name>.corrupt with a message; if none
/// loads it falls back to load_path. Algorithms a checkpoint requires (model surgery) that the run lacks are
/// re-created from the registry and applied at INIT first. Throws CheckpointError naming the file when a checkpoint
/// cannot be applied, std::invalid_argument for autoresume without a run name.
ResumePoint load_for_run(State& state, Logger& logger, const ResumeOptions& options);

}  // namespace composer
