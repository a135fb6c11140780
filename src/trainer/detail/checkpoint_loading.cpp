#include "trainer/detail/checkpoint_loading.h"

#include "composer/algorithms/registry.h"
#include "composer/checkpoint/checkpoint.h"
#include "composer/core/algorithm.h"
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

// Composer's required_on_load: a checkpoint made after model surgery fits only a model with the same surgery.
// Algorithms the checkpoint lists that this run lacks are re-created from their repr through the registry and
// applied at INIT; names the registry does not know (user algorithms) are left to the model-key check.
void restore_required_algorithms(TrainerImpl& t, const c10::IValue& payload, const std::string& path) {
  const auto state = payload.toGenericDict().at("state").toGenericDict();
  if (!state.contains("algorithms")) return;
  for (const auto& entry : state.at("algorithms").toList()) {
    const auto tuple = entry.get().toTuple();
    const std::string name = tuple->elements().at(0).toStringRef();
    const c10::IValue& saved = tuple->elements().at(1);
    const auto& present = t.state.algorithms;
    if (std::any_of(present.begin(), present.end(), [&](const auto& a) { return a->name() == name; })) continue;
    if (!algorithms::find_algorithm(name) || !saved.isGenericDict() || !saved.toGenericDict().contains("repr")) continue;
    const std::string repr = saved.toGenericDict().at("repr").toStringRef();
    std::shared_ptr<Algorithm> algorithm;
    try {
      algorithm = algorithms::make_algorithm_from_repr(repr);
    } catch (const std::invalid_argument& e) {
      throw CheckpointError("checkpoint '" + path + "' was trained with " + repr + ", which cannot be re-created: " + e.what());
    }
    if (!algorithm->required_on_load()) continue;
    algorithm->apply(Event::INIT, t.state, t.logger);
    t.state.algorithms.push_back(algorithm);
    report("re-created " + repr + " from '" + path + "' (required on load: it changes the model)");
  }
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
    restore_required_algorithms(t, payload, path);
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
  const c10::IValue payload = read_checkpoint(path);
  restore_required_algorithms(t, payload, path);
  t.pending_rng = apply_checkpoint(t.state, payload, load_options(o), path);
  report("loaded '" + path + "' (batch " + std::to_string(t.state.timestamp.batch) + ")");
}

}  // namespace composer::detail
