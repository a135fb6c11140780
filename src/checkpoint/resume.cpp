#include "composer/checkpoint/resume.h"

#include "checkpoint/detail/remote_checkpoints.h"
#include "checkpoint/detail/sharded_checkpoints.h"
#include "composer/algorithms/registry.h"
#include "composer/checkpoint/checkpoint_saver.h"
#include "composer/checkpoint/state_codec.h"
#include "composer/core/algorithm.h"
#include "composer/core/engine.h"
#include "composer/core/format_name.h"
#include "composer/core/state.h"
#include "composer/dist/dist.h"
#include "composer/dist/env.h"
#include "composer/dist/strategy.h"
#include "composer/storage/object_store.h"

#include <ATen/ATen.h>

#include <torch/serialize.h>

#include <cstring>
#include <exception>
#include <filesystem>
#include <iostream>

namespace composer {
namespace fs = std::filesystem;
namespace {

void report(const std::string& what) {
  if (dist::get_global_rank() == 0) std::cerr << "composer: " << what << "\n";
}

// FSDP's load_monolith_rank0_only: rank 0 reads the checkpoint and broadcasts it, pickled, to the other ranks,
// which never open `path`. A failure on rank 0 is every rank's error.
c10::IValue share_from_rank0(const std::string& path) {
  const bool rank0 = dist::get_global_rank() == 0;
  c10::IValue payload;
  std::exception_ptr failed;
  std::string error;
  at::Tensor bytes;
  if (rank0) {
    try {
      payload = detail::read_checkpoint_from(path);
      const std::vector<char> pickled = torch::pickle_save(payload);
      bytes = at::empty({static_cast<int64_t>(pickled.size())}, at::kByte);
      std::memcpy(bytes.data_ptr(), pickled.data(), pickled.size());
    } catch (const std::exception& e) {
      failed = std::current_exception();
      error = e.what();
    }
  }
  const std::string rank0_error = dist::all_gather_object(error).at(0);
  if (failed) std::rethrow_exception(failed);
  if (!rank0_error.empty())
    throw CheckpointError("rank 0 could not load the checkpoint (load_monolith_rank0_only): " + rank0_error);
  at::Tensor size = at::full({1}, rank0 ? bytes.numel() : 0, at::kLong);
  dist::broadcast(size, 0);
  if (!rank0) bytes = at::empty({size.item<int64_t>()}, at::kByte);
  dist::broadcast(bytes, 0);
  if (rank0) return payload;
  const auto* data = static_cast<const char*>(bytes.data_ptr());
  return torch::pickle_load(std::vector<char>(data, data + bytes.numel()));
}

// Composer's required_on_load: a checkpoint made after model surgery fits only a model with the same surgery.
// Algorithms the checkpoint lists that this run lacks (and does not exclude) are re-created from their repr through
// the registry and join at INIT through the engine; names the registry does not know (user algorithms) are left to
// the model-key check.
void restore_required_algorithms(State& s, Engine& engine, const c10::IValue& payload, const std::string& path,
                                 const std::vector<std::string>& excluded) {
  const auto state = payload.toGenericDict().at("state").toGenericDict();
  if (!state.contains("algorithms")) return;
  std::vector<std::shared_ptr<Algorithm>> joining;
  std::vector<std::string> reprs;
  for (const auto& entry : state.at("algorithms").toList()) {
    const auto tuple = entry.get().toTuple();
    const std::string name = tuple->elements().at(0).toStringRef();
    const c10::IValue& saved = tuple->elements().at(1);
    const auto& present = s.algorithms;
    if (std::any_of(present.begin(), present.end(), [&](const auto& a) { return a->name() == name; })) continue;
    if (std::find(excluded.begin(), excluded.end(), name) != excluded.end()) continue;
    if (!algorithms::find_algorithm(name) || !saved.isGenericDict() || !saved.toGenericDict().contains("repr"))
      continue;
    const std::string repr = saved.toGenericDict().at("repr").toStringRef();
    std::shared_ptr<Algorithm> algorithm;
    try {
      algorithm = algorithms::make_algorithm_from_repr(repr);
    } catch (const std::invalid_argument& e) {
      throw CheckpointError("checkpoint '" + path + "' was trained with " + repr +
                            ", which cannot be re-created: " + e.what());
    }
    if (!algorithm->required_on_load()) continue;
    joining.push_back(algorithm);
    reprs.push_back(repr);
  }
  if (!joining.empty() && s.strategy && s.strategy->setup_before_load()) {
    throw CheckpointError("checkpoint '" + path + "' was trained with " + reprs.front() +
                          ", which changes the model; under the " + s.strategy->name() +
                          " strategy the model is set up (sharded) before the checkpoint loads, so pass that algorithm "
                          "in algorithms");
  }
  try {
    engine.add_late_algorithms(joining);
  } catch (const std::invalid_argument& e) {
    throw CheckpointError("checkpoint '" + path + "': " + e.what());
  }
  for (const auto& repr : reprs)
    report("re-created " + repr + " from '" + path + "' (required on load: it changes the model)");
}

// The checkpoints of this run in save_folder that autoresume may load, newest first: local paths (canonical) or
// object-store URIs.
std::vector<std::string> resume_candidates(const State& s, const ResumeOptions& o) {
  // FSDP's sharded checkpoints are directories (folders of objects) named by sharded_ckpt_prefix_dir.
  const std::string pattern = detail::sharded_checkpoint_prefix(s).value_or(o.save().filename());
  if (is_object_store_uri(o.save().folder()))
    return detail::remote_checkpoint_candidates(o.save().folder(), pattern, o.save().latest_filename(), s);
  const std::string folder = format_name(o.save().folder(), s);
  // Newest first by batch (find_checkpoints' order): a kill between a checkpoint's rename and the link update leaves
  // the link one behind. A link target outside the naming pattern is tried last.
  std::vector<std::string> candidates;
  for (const auto& [count, path] : find_checkpoints(folder, pattern, s))
    candidates.push_back(fs::canonical(path).string());
  const fs::path latest = fs::path(folder) / format_name(o.save().latest_filename(), s);
  if (!o.save().latest_filename().empty() && fs::is_symlink(latest) && fs::exists(latest)) {
    const std::string target = fs::canonical(latest).string();
    if (std::find(candidates.begin(), candidates.end(), target) == candidates.end()) candidates.push_back(target);
  }
  return candidates;
}

// Rank 0 puts aside a candidate that did not read: a local one is renamed <name>.corrupt; an object (complete once
// listed) is skipped and kept.
void set_aside(const std::string& path, const std::string& error) {
  if (is_object_store_uri(path)) {
    report(error + "; trying the previous checkpoint");
    return;
  }
  const std::string aside = path + ".corrupt";
  std::error_code ec;
  fs::rename(path, aside, ec);
  report(error + "; moved it to '" + aside + "' and trying the previous checkpoint");
}

// What one checkpoint reads as on this rank: the payload and, under FSDP, this rank's parts of the sharded tensors.
struct ReadResult {
  c10::IValue payload;
  std::vector<ShardedEntry> parts;
};

// Every rank reads `path` (each its part of a sharded checkpoint under FSDP, or rank 0 alone and broadcasting it
// under load_monolith_rank0_only); "" when every rank did, else the first error, on every rank.
std::string read_on_every_rank(const State& s, const std::string& path, ReadResult& out) {
  out = {};
  if (dist::get_world_size() > 1 && detail::loads_on_rank0_only(s)) {
    try {
      out.payload = share_from_rank0(path);  // agrees on rank 0's error itself
    } catch (const std::exception& e) {
      return e.what();
    }
    return "";
  }
  std::string error;
  try {
    out.payload = detail::read_checkpoint_from(path, local_parts_wanted(s), out.parts);
  } catch (const std::exception& e) {  // CheckpointError, or anything else: every rank must hear of it
    error = e.what();
  }
  if (dist::get_world_size() == 1) return error;
  // On every rank, the failed ones too, so that no rank waits alone; a rank's own error first.
  const std::vector<std::string> errors = dist::all_gather_object(error);
  if (!error.empty()) return error;
  for (size_t r = 0; r < errors.size(); ++r)
    if (!errors[r].empty()) return "rank " + std::to_string(r) + " could not read it: " + errors[r];
  return "";
}

}  // namespace

std::string format_load_path(const std::string& pattern, const std::string& run_name) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if ((c == '{' || c == '}') && i + 1 < pattern.size() && pattern[i + 1] == c) {
      out += c;
      ++i;
      continue;
    }
    const size_t close = c == '{' ? pattern.find('}', i) : std::string::npos;
    if (close == std::string::npos) {
      out += c;
      continue;
    }
    const std::string name = pattern.substr(i + 1, close - i - 1);
    if (name == "run_name")
      out += run_name;
    else if (name == "rank" || name == "local_rank" || name == "node_rank")
      out += "0";
    else
      throw std::invalid_argument("load_path '" + pattern + "': {" + name +
                                  "} cannot be filled when loading (load_path takes {run_name}, and {rank}, "
                                  "{local_rank} and {node_rank} as rank 0's, as Composer does)");
    i = close;
  }
  return out;
}

std::optional<c10::IValue> load_checkpoint_path(State& state, const std::string& path,
                                                const CheckpointLoadOptions& options) {
  const std::string formatted = format_load_path(path, state.run_name);
  ReadResult read;
  const std::string error = read_on_every_rank(state, formatted, read);
  if (!error.empty()) throw CheckpointError(error);
  return apply_checkpoint(state, read.payload, options, formatted, std::move(read.parts));
}

namespace {

// Autoresume. Only rank 0 writes checkpoints (or the sharded checkpoint's metadata), so rank 0 proposes them, newest
// first, and every rank reads each (its part, under FSDP) until all of them read one; one that some rank could not
// read is set aside. The ranks then check that they resumed at the same batch.
ResumePoint try_autoresume(State& s, Engine& engine, const ResumeOptions& o) {
  const int64_t rank = dist::get_global_rank();
  const std::vector<std::string> candidates = rank == 0 ? resume_candidates(s, o) : std::vector<std::string>{};
  std::string path;
  ReadResult read;
  for (size_t i = 0;; ++i) {
    std::string candidate = rank == 0 && i < candidates.size() ? candidates[i] : "";
    if (dist::get_world_size() > 1) candidate = dist::all_gather_object(candidate).at(0);
    if (candidate.empty()) return {};
    const std::string error = read_on_every_rank(s, candidate, read);
    if (error.empty()) {
      path = candidate;
      break;
    }
    if (rank == 0) set_aside(candidate, error);
  }
  CheckpointLoadOptions lo;  // Composer: autoresume ignores load_weights_only / load_ignore_keys
  restore_required_algorithms(s, engine, read.payload, path, o.load().exclude_algorithms());
  ResumePoint point{path, apply_checkpoint(s, read.payload, lo, path, std::move(read.parts))};
  if (dist::get_world_size() > 1) {
    at::Tensor lo_batch = at::full({1}, s.timestamp.batch, at::kLong), hi_batch = lo_batch.clone();
    dist::all_reduce(lo_batch, dist::ReduceOp::MIN);
    dist::all_reduce(hi_batch, dist::ReduceOp::MAX);
    if (lo_batch.item<int64_t>() != hi_batch.item<int64_t>()) {
      throw CheckpointError("autoresume: timestamp mismatch across ranks after loading '" + path + "' (batches " +
                            std::to_string(lo_batch.item<int64_t>()) + " to " +
                            std::to_string(hi_batch.item<int64_t>()) + ")");
    }
  }
  report("autoresume: resumed run '" + s.run_name + "' from '" + path + "' at batch " +
         std::to_string(s.timestamp.batch));
  return point;
}

}  // namespace

CheckpointLoadOptions LoadOptions::apply_options() const {
  CheckpointLoadOptions options;
  options.weights_only = weights_only_;
  options.strict_model = strict_model_weights_;
  options.ignore_keys = ignore_keys_;
  return options;
}

void ResumePoint::restore(int64_t rank) const {
  if (rng) restore_rng(*rng, rank);
}

ResumePoint load_for_run(State& state, Engine& engine, const ResumeOptions& o) {
  const LoadOptions& load = o.load();
  if (load.autoresume()) {
    if (o.requested_run_name().empty() && !std::getenv("COMPOSER_RUN_NAME") && !std::getenv("RUN_NAME")) {
      throw std::invalid_argument(
          "autoresume needs an explicit run_name (or $COMPOSER_RUN_NAME) to find its checkpoints");
    }
    ResumePoint point = try_autoresume(state, engine, o);
    if (!point.path.empty()) return point;
  }
  if (load.path().empty()) return {};
  const std::string path = format_load_path(load.path(), state.run_name);
  ReadResult read;
  const std::string error = read_on_every_rank(state, path, read);
  if (!error.empty()) throw CheckpointError(error);
  restore_required_algorithms(state, engine, read.payload, path, load.exclude_algorithms());
  ResumePoint point{path, apply_checkpoint(state, read.payload, load.apply_options(), path, std::move(read.parts))};
  report("loaded '" + path + "' (batch " + std::to_string(state.timestamp.batch) + ")");
  return point;
}

}  // namespace composer
