#include "composer/checkpoint/checkpoint_saver.h"

#include "checkpoint/detail/background_write.h"
#include "checkpoint/detail/remote_checkpoints.h"
#include "checkpoint/detail/sharded_checkpoints.h"
#include "checkpoint/detail/sharded_write.h"
#include "composer/checkpoint/checkpoint.h"
#include "composer/checkpoint/distributed_checkpoint.h"
#include "composer/checkpoint/state_codec.h"
#include "composer/core/logger.h"
#include "composer/core/serialization.h"
#include "composer/core/state.h"
#include "composer/dist/dist.h"
#include "composer/dist/env.h"
#include "composer/storage/remote_uploader.h"
#include "composer/utils/atomic_file.h"
#include "formats/detail/pickle_io.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <regex>

namespace composer {
namespace fs = std::filesystem;

void CheckpointSaverOptions::validate() const {
  if (folder_.empty()) throw std::invalid_argument("CheckpointSaver.folder must not be empty");
  try {
    if (is_object_store_uri(folder_)) make_object_store(folder_);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string("save_folder ") + e.what());
  }
  if (filename_.empty()) throw std::invalid_argument("CheckpointSaver.filename must not be empty");
  if ((num_checkpoints_to_keep_ == 0 && !is_object_store_uri(folder_)) || num_checkpoints_to_keep_ < -1) {
    throw std::invalid_argument("CheckpointSaver.num_checkpoints_to_keep must be -1 (all) or >= 0, got " +
                                std::to_string(num_checkpoints_to_keep_) +
                                " (0 keeps no local copy: it needs an object-store folder, s3:// or file://)");
  }
  if (num_concurrent_uploads_ < 1) {
    throw std::invalid_argument("CheckpointSaver.num_concurrent_uploads must be >= 1, got " +
                                std::to_string(num_concurrent_uploads_));
  }
  if (!save_interval_fn_ && save_interval_.unit() != TimeUnit::DURATION && save_interval_.value() <= 0) {
    throw std::invalid_argument("CheckpointSaver.save_interval must be positive, got " + save_interval_.to_string());
  }
}

namespace {

/// Throws, on every rank, the first rank's error of a step every rank takes ("" on a rank that succeeded): the
/// gather is also the barrier between steps.
void throw_any_rank_error(const std::string& error, const std::string& what) {
  const std::vector<std::string> errors = dist::all_gather_object(error);
  for (size_t r = 0; r < errors.size(); ++r)
    if (!errors[r].empty())
      throw std::runtime_error("CheckpointSaver: rank " + std::to_string(r) + " " + what + ": " + errors[r]);
}

/// FSDP's sharded checkpoints in an object store: this rank's file of `dir` goes up under `key` (the checkpoint's
/// folder, ending in '/') before rank 0 uploads the .metadata (upload()), so that in the store a folder is a
/// checkpoint only once it is whole. A complete one of the same name is an error without overwrite; with it, rank 0
/// first deletes its .metadata, so that old and new files never form a "complete" checkpoint. A folder without
/// .metadata (a save or upload that did not finish) is replaced. Each rank waits for its own upload.
void upload_rank_files(RemoteUploader& uploader, const std::string& key, const fs::path& dir, bool overwrite) {
  const bool rank0 = dist::get_global_rank() == 0;
  std::string error;
  try {
    if (uploader.remote_backend().object_exists(key + ".metadata")) {
      if (!overwrite)
        error = "'" + uploader.get_uri(key) + "' already exists; set save_overwrite to replace it";
      else if (rank0)
        uploader.remote_backend().delete_object(key + ".metadata");
    }
  } catch (const std::exception& e) {
    error = e.what();
  }
  throw_any_rank_error(error, "cannot save '" + dir.filename().string() + "'");
  const fs::path mine = dir / distcp_file_name(dist::get_global_rank());
  try {
    uploader.upload_file_async(key + mine.filename().string(), mine.string(), /*overwrite=*/true);
    uploader.wait();
  } catch (const std::exception& e) {
    error = e.what();
  }
  throw_any_rank_error(error, "could not upload its part of '" + dir.filename().string() + "'");
  std::error_code ec;
  if (!rank0) fs::remove_all(dir, ec);  // uploaded; rank 0 keeps its copy until retention removes it
}

/// num_checkpoints_to_keep 0: every local copy goes once it is staged for upload (the uploader keeps its own copy).
void drop_local_copies(std::vector<std::string>& saved) {
  std::error_code ec;
  for (const auto& path : saved) fs::remove_all(path, ec);
  saved.clear();
}

}  // namespace

// A checkpoint whose files are complete, and what follows from that: fixed at the save point, so that a background
// write completes with the names of its own batch.
struct CheckpointSaver::Written {
  std::string path;  // the file, or the sharded checkpoint's directory
  bool sharded = false;
  int64_t batch = 0;
  std::string latest_link;       // the local link to point at it; "" for none
  std::string latest_name;       // the latest_filename formatted (the object store's pointer object); "" for none
  std::string remote_prefix;     // the object-store folder's prefix ("" for a local folder)
  std::string remote_file_name;  // formatted; "" for none
};

// save_async: the save a background thread writes. `records` (a sharded checkpoint's) comes before `write`, whose
// destructor joins the thread that fills it.
struct CheckpointSaver::Pending {
  Written written;
  std::string records;
  std::unique_ptr<detail::BackgroundWrite> write;
};

CheckpointSaver::CheckpointSaver(CheckpointSaverOptions options) : options_(std::move(options)) {
  options_.validate();
  due_ =
      options_.save_interval_fn() ? options_.save_interval_fn() : create_interval_scheduler(options_.save_interval());
  if (is_object_store_uri(options_.folder())) {  // validate() checked the scheme and the bucket
    std::random_device rd;
    local_root_ = (fs::temp_directory_path() / ("composer-checkpoints-" + std::to_string(rd()))).string();
  }
}

CheckpointSaver::~CheckpointSaver() {
  pending_.reset();   // waits for a background write (its checkpoint completes on disk, or is left incomplete)
  uploader_.reset();  // waits for pending uploads (a run that failed still gets its checkpoints up)
  std::error_code ec;
  if (!local_root_.empty()) fs::remove_all(local_root_, ec);
}

std::string CheckpointSaver::folder(const State& state) const {
  if (local_root_.empty()) return format_name(options_.folder(), state);
  return (fs::path(local_root_) / remote_folder(state)).string();
}

std::string CheckpointSaver::remote_folder(const State& state) const {
  if (local_root_.empty()) return "";
  return format_name(parse_uri(options_.folder()).path, state);
}

void CheckpointSaver::fit_start(State& state, Logger&) {
  const bool rank0 = dist::get_global_rank() == 0;
  // Rank 0 uploads monolithic checkpoints; with sharded ones every rank uploads its own file.
  if (!local_root_.empty() && (rank0 || detail::sharded_checkpoint_prefix(state))) {
    if (!uploader_) {
      uploader_ = std::make_unique<RemoteUploader>(
          options_.folder(), RemoteUploaderOptions().num_concurrent_uploads(options_.num_concurrent_uploads()));
    }
    if (rank0 && !options_.overwrite()) check_remote_folder(state);
  }
  if (!rank0) return;
  // Temporary files of a save that was killed: never complete, never read; remove them, beside the checkpoints and
  // inside sharded checkpoints' folders (a resumed run may complete such a folder later).
  if (fs::is_directory(folder(state))) {
    static const std::regex temp(R"(^\..+\.tmp-\d+$)");
    const auto remove_temporaries = [&](const fs::path& dir) {
      std::error_code ec;
      for (const auto& entry : fs::directory_iterator(dir, ec)) {
        std::error_code ignored;
        if (std::regex_match(entry.path().filename().string(), temp)) fs::remove(entry.path(), ignored);
      }
    };
    remove_temporaries(folder(state));
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(folder(state), ec)) {
      std::error_code ignored;
      if (entry.is_directory(ignored) && !entry.is_symlink(ignored)) remove_temporaries(entry.path());
    }
  }
  if (options_.overwrite()) return;
  const bool by_batch = options_.filename().find("{batch}") != std::string::npos;
  const int64_t now = by_batch ? state.timestamp.batch : state.timestamp.epoch;
  for (const auto& [count, path] : find_checkpoints(folder(state), checkpoint_pattern(state), state)) {
    if (count > now) {
      throw std::invalid_argument("CheckpointSaver: '" + path + "' is from later in training than this run (" +
                                  (by_batch ? "batch " : "epoch ") + std::to_string(now) +
                                  "); set save_overwrite, use autoresume, or choose another save_folder");
    }
  }
}

void CheckpointSaver::check_remote_folder(const State& state) {
  const std::string prefix = detail::folder_prefix(remote_folder(state));
  const std::vector<std::string> names = detail::checkpoint_names_in_folder(uploader_->remote_backend(), prefix);
  const std::string pattern = checkpoint_pattern(state);
  const bool by_batch = pattern.find("{batch}") != std::string::npos;
  const int64_t now = by_batch ? state.timestamp.batch : state.timestamp.epoch;
  for (const auto& [count, name] : match_checkpoint_names(names, pattern, state)) {
    if (count > now) {
      throw std::invalid_argument("CheckpointSaver: '" + uploader_->get_uri(prefix + name) +
                                  "' is from later in training than this run (" + (by_batch ? "batch " : "epoch ") +
                                  std::to_string(now) +
                                  "); set save_overwrite, use autoresume, or choose another save_folder");
    }
  }
}

void CheckpointSaver::batch_end(State&, Logger& logger) {
  // A one-file checkpoint written in the background completes as soon as its file is (rank 0 alone); a sharded one
  // when the ranks next meet.
  if (pending_ && !pending_->written.sharded && pending_->write->done()) finish_pending(logger);
  if (uploader_) uploader_->check_workers();
}

void CheckpointSaver::fit_end(State& state, Logger& logger) {
  finish_pending(logger);
  if (options_.save_async() && dist::get_world_size() > 1) dist::barrier();  // no rank leaves while rank 0 writes
  if (!uploader_) return;
  uploader_->wait();
  if (dist::get_global_rank() != 0) return;
  int64_t checkpoints = 0;  // files, and sharded checkpoints by their .metadata (not their rank files)
  auto ends_with = [](const std::string& name, const std::string& end) {
    return name.size() >= end.size() && name.compare(name.size() - end.size(), end.size(), end) == 0;
  };
  for (const auto& name : uploader_->uploaded())
    if (!ends_with(name, ".symlink") && !ends_with(name, ".distcp")) ++checkpoints;
  const auto deleted = uploader_->deleted();
  std::cerr << "composer: uploaded " << checkpoints << " checkpoint(s) to " << uploader_->get_uri(remote_folder(state))
            << (deleted.empty() ? "" : " (deleted " + std::to_string(deleted.size()) + " older)")
            << (last_key_.empty() ? "" : "; newest " + uploader_->get_uri(last_key_)) << "\n";
}

void CheckpointSaver::batch_checkpoint(State& state, Logger& logger) {
  maybe_save(state, logger, Event::BATCH_CHECKPOINT);
}
void CheckpointSaver::epoch_checkpoint(State& state, Logger& logger) {
  maybe_save(state, logger, Event::EPOCH_CHECKPOINT);
}
void CheckpointSaver::iteration_checkpoint(State& state, Logger& logger) {
  maybe_save(state, logger, Event::ITERATION_CHECKPOINT);
}

bool CheckpointSaver::will_save_checkpoint(const State& state, Event event) const {
  return state.timestamp.batch != last_saved_batch_ && due_(state, event);
}

void CheckpointSaver::maybe_save(State& state, Logger& logger, Event event) {
  if (will_save_checkpoint(state, event)) save(state, logger);
}

void CheckpointSaver::save(State& state, Logger& logger) {
  finish_pending(logger);  // at most one save in flight
  last_saved_batch_ = state.timestamp.batch;
  // Every rank's RNG goes into rank 0's file; the barrier after the write keeps every rank here until the file is
  // complete, so none exits or times out while rank 0 still writes.
  std::optional<c10::IValue> rng;
  if (!options_.weights_only()) rng = gather_rng_states();
  if (const auto prefix = detail::sharded_checkpoint_prefix(state)) {
    write_sharded(state, logger, rng, *prefix);
    dist::barrier();
    return;
  }
  if (dist::get_global_rank() != 0) {  // monolithic checkpoints are written by rank 0
    // FSDP: the whole state is gathered from every rank while rank 0 makes its checkpoint (the same collectives).
    if (state_dict_is_collective(state)) (void)make_checkpoint(state, options_.weights_only(), rng);
    dist::barrier();
    return;
  }
  write(state, logger, rng);
  dist::barrier();
}

CheckpointSaver::Written CheckpointSaver::written_of(const State& state, const std::string& path, bool sharded) const {
  Written w;
  w.path = path;
  w.sharded = sharded;
  w.batch = state.timestamp.batch;
  if (!options_.latest_filename().empty() && options_.num_checkpoints_to_keep() != 0)  // no local copies: no link
    w.latest_link = (fs::path(folder(state)) / format_name(options_.latest_filename(), state)).string();
  w.latest_name = options_.latest_filename().empty() ? "" : format_name(options_.latest_filename(), state);
  w.remote_prefix = detail::folder_prefix(remote_folder(state));
  if (!options_.remote_file_name().empty()) w.remote_file_name = format_name(options_.remote_file_name(), state);
  return w;
}

void CheckpointSaver::write(State& state, Logger& logger, const std::optional<c10::IValue>& rng) {
  const fs::path path = fs::path(folder(state)) / format_name(options_.filename(), state);
  if (fs::exists(path) && !options_.overwrite() && (saved_.empty() || saved_.back() != path.string())) {
    throw std::invalid_argument("CheckpointSaver: '" + path.string() +
                                "' already exists; set save_overwrite to replace it");
  }
  // The saver's own state inside the checkpoint already lists this checkpoint.
  saved_.push_back(path.string());
  const Written w = written_of(state, path.string(), /*sharded=*/false);
  try {
    if (options_.save_async()) {  // the payload copied now; the file, then the link, on the thread
      auto payload =
          std::make_shared<c10::IValue>(detail::host_copy(make_checkpoint(state, options_.weights_only(), rng)));
      pending_ = std::make_unique<Pending>();
      pending_->written = w;
      pending_->write = std::make_unique<detail::BackgroundWrite>([payload, w] {
        write_file_atomically(w.path, [&](const ByteSink& sink) { detail::pickle_to(*payload, sink); });
        if (!w.latest_link.empty()) replace_symlink(fs::path(w.path).filename().string(), w.latest_link);
      });
      return;
    }
    save_checkpoint(state, path.string(), options_.weights_only(), rng);
  } catch (...) {
    saved_.pop_back();
    throw;
  }
  if (!w.latest_link.empty()) replace_symlink(path.filename().string(), w.latest_link);
  complete(w, logger);
}

void CheckpointSaver::complete(const Written& w, Logger& logger) {
  const int64_t keep = options_.num_checkpoints_to_keep();
  if (w.sharded && !w.latest_link.empty())  // a sharded checkpoint is one once its .metadata is written
    replace_symlink(fs::path(w.path).filename().string(), w.latest_link);
  if (uploader_) upload(w.remote_prefix, w.latest_name, w.path);
  while (keep > 0 && static_cast<int64_t>(saved_.size()) > keep) {
    const std::string old = saved_.front();
    std::error_code ec;
    fs::remove_all(old, ec);
    if (uploader_) {
      const std::string key = w.remote_prefix + fs::path(old).filename().string();
      if (w.sharded) {  // its .metadata goes first: a folder that lost some files is never again a checkpoint
        uploader_->delete_file_after_pending(key + "/.metadata");
        for (const auto& object : uploader_->remote_backend().list_objects(key + "/"))
          if (object.name != key + "/.metadata") uploader_->delete_file_after_pending(object.name);
      } else {
        uploader_->delete_file_after_pending(key);
      }
    }
    saved_.erase(saved_.begin());
  }
  if (!w.sharded && !w.remote_file_name.empty()) {
    try {
      logger.upload_file(w.remote_file_name, w.path, options_.overwrite());
    } catch (const std::exception& e) {  // the checkpoint is complete on disk; a lost upload must not end the run
      std::cerr << "composer: checkpoint " << w.path << " is saved, but its upload failed: " << e.what() << "\n";
    }
  }
  if (keep == 0) drop_local_copies(saved_);  // staged for upload above; the store keeps every one (Composer)
  logger.log_metrics({{"checkpoint/batch", static_cast<double>(w.batch)}});
}

void CheckpointSaver::finish_pending(Logger& logger) {
  if (!pending_) return;
  const std::unique_ptr<Pending> p = std::move(pending_);
  const std::string error = p->write->wait();
  const bool rank0 = dist::get_global_rank() == 0;
  const auto forget = [&] {
    if (rank0) saved_.erase(std::remove(saved_.begin(), saved_.end(), p->written.path), saved_.end());
  };
  if (!p->written.sharded) {
    if (!error.empty()) {
      forget();
      throw std::runtime_error("CheckpointSaver: writing '" + p->written.path + "' in the background failed: " + error);
    }
    complete(p->written, logger);
    return;
  }
  const fs::path dir(p->written.path);
  try {
    detail::finish_rank_files(dir.string(), p->records, error);  // every rank: the .metadata once all files are
    if (uploader_)
      upload_rank_files(*uploader_, p->written.remote_prefix + dir.filename().string() + "/", dir,
                        options_.overwrite());
  } catch (...) {
    forget();
    throw;
  }
  if (rank0) complete(p->written, logger);
}

std::string CheckpointSaver::checkpoint_pattern(const State& state) const {
  return detail::sharded_checkpoint_prefix(state).value_or(options_.filename());
}

void CheckpointSaver::write_sharded(State& state, Logger& logger, const std::optional<c10::IValue>& rng,
                                    const std::string& prefix) {
  const fs::path dir = fs::path(folder(state)) / format_name(prefix, state);
  const bool rank0 = dist::get_global_rank() == 0;
  if (is_distributed_checkpoint(dir.string()) && !options_.overwrite()) {
    throw std::invalid_argument("CheckpointSaver: '" + dir.string() +
                                "' already exists; set save_overwrite to replace it");
  }
  // The saver's own state inside the checkpoint (rank 0 writes it) already lists this checkpoint.
  if (rank0) saved_.push_back(dir.string());
  const Written w = written_of(state, dir.string(), /*sharded=*/true);
  try {
    if (rank0) fs::remove(dir / ".metadata");  // an overwritten checkpoint is incomplete until its new metadata
    if (options_.save_async()) {  // this rank's part copied now; its file on the thread; the metadata at finish
      const auto prepared = detail::prepare_rank_file(state, options_.weights_only(), rng, /*copy=*/true);
      pending_ = std::make_unique<Pending>();
      pending_->written = w;
      Pending* pending = pending_.get();
      pending_->write = std::make_unique<detail::BackgroundWrite>([prepared, pending] {
        pending->records = detail::write_prepared_rank_file(*prepared, pending->written.path);
      });
      return;
    }
    save_distributed_checkpoint(state, dir.string(), options_.weights_only(), rng);
    if (uploader_)
      upload_rank_files(*uploader_, w.remote_prefix + dir.filename().string() + "/", dir, options_.overwrite());
  } catch (...) {
    if (rank0) saved_.pop_back();
    throw;
  }
  if (rank0) complete(w, logger);
}

void CheckpointSaver::upload(const std::string& prefix, const std::string& latest_name, const std::string& path) {
  const std::string key = prefix + fs::path(path).filename().string();
  if (fs::is_directory(path)) {  // a sharded checkpoint: the ranks' files are up (upload_rank_files); now .metadata
    uploader_->upload_file_async(key + "/.metadata", (fs::path(path) / ".metadata").string(), options_.overwrite());
  } else {
    uploader_->upload_file_async(key, path, options_.overwrite());
  }
  last_key_ = key;
  if (latest_name.empty()) return;
  // Composer's remote "symlink": an object holding the checkpoint's key, uploaded only after the checkpoint is.
  const fs::path pointer = fs::path(local_root_) / ("latest." + std::to_string(pointer_count_++) + ".symlink");
  {
    std::ofstream out(pointer, std::ios::binary | std::ios::trunc);
    out << key;
    if (!out) throw std::runtime_error("CheckpointSaver: cannot write '" + pointer.string() + "'");
  }
  uploader_->upload_file_after_pending(prefix + latest_name + ".symlink", pointer.string());
  std::error_code ec;
  fs::remove(pointer, ec);
}

c10::IValue CheckpointSaver::state_dict() const {
  Dict d = new_dict();
  c10::List<std::string> saved;
  for (const auto& s : saved_) saved.push_back(s);
  d.insert("saved_checkpoints", saved);
  return d;
}

void CheckpointSaver::load_state_dict(const c10::IValue& state) {
  const Dict d = state.toGenericDict();
  saved_.clear();
  if (d.contains("saved_checkpoints")) {
    for (const auto& s : d.at("saved_checkpoints").toList()) saved_.push_back(s.get().toStringRef());
  }
}

}  // namespace composer
