#include "trainer/detail/checkpoint_loading.h"

#include "composer/checkpoint/checkpoint.h"
#include "composer/checkpoint/checkpoint_saver.h"
#include "composer/dist/env.h"

#include <filesystem>
#include <iostream>

namespace composer::detail {
namespace fs = std::filesystem;
namespace {

CheckpointLoadOptions load_options(const TrainerOptions& o) {
  CheckpointLoadOptions lo;
  lo.weights_only = o.load_weights_only();
  lo.strict_model = o.load_strict_model_weights();
  lo.ignore_keys = o.load_ignore_keys();
  return lo;
}

void report(const std::string& what) {
  if (dist::get_global_rank() == 0) std::cerr << "composer: " << what << "\n";
}

// The newest readable checkpoint of this run in save_folder, or "" when there is none.
bool try_autoresume(TrainerImpl& t) {
  State& s = t.state;
  const TrainerOptions& o = t.options;
  const std::string folder = format_name(o.save_folder(), s);
  // Newest first by batch (find_checkpoints' order): a kill between a checkpoint's rename and the link update leaves
  // the link one behind. A link target outside the naming pattern is tried last.
  std::vector<std::string> candidates;
  for (const auto& [count, path] : find_checkpoints(folder, o.save_filename(), s)) candidates.push_back(fs::canonical(path).string());
  const fs::path latest = fs::path(folder) / format_name(o.save_latest_filename(), s);
  if (!o.save_latest_filename().empty() && fs::is_symlink(latest) && fs::exists(latest)) {
    const std::string target = fs::canonical(latest).string();
    if (std::find(candidates.begin(), candidates.end(), target) == candidates.end()) candidates.push_back(target);
  }
  for (const auto& path : candidates) {
    c10::IValue payload;
    try {
      payload = read_checkpoint(path);
    } catch (const CheckpointError& e) {
      const std::string aside = path + ".corrupt";
      std::error_code ec;
      fs::rename(path, aside, ec);
      report(std::string(e.what()) + "; moved it to '" + aside + "' and trying the previous checkpoint");
      continue;
    }
    CheckpointLoadOptions lo;  // Composer: autoresume ignores load_weights_only / load_ignore_keys
    t.pending_rng = apply_checkpoint(s, payload, lo, path);
    report("autoresume: resumed run '" + s.run_name + "' from '" + path + "' at batch " + std::to_string(s.timestamp.batch));
    return true;
  }
  return false;
}

}  // namespace

void load_checkpoints(TrainerImpl& t) {
  const TrainerOptions& o = t.options;
  if (o.autoresume()) {
    if (o.run_name().empty() && !std::getenv("COMPOSER_RUN_NAME") && !std::getenv("RUN_NAME")) {
      throw std::invalid_argument("autoresume needs an explicit run_name (or $COMPOSER_RUN_NAME) to find its checkpoints");
    }
    if (try_autoresume(t)) return;
  }
  if (o.load_path().empty()) return;
  const std::string path = format_name(o.load_path(), t.state);
  t.pending_rng = apply_checkpoint(t.state, read_checkpoint(path), load_options(o), path);
  report("loaded '" + path + "' (batch " + std::to_string(t.state.timestamp.batch) + ")");
}

}  // namespace composer::detail
