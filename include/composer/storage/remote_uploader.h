// RemoteUploader: uploads files to an object store in the background (Composer's composer.utils.RemoteUploader), so a
// training step never waits for the network. Files are copied to a staging folder first, so the caller may delete
// or rewrite its own copy at once.
#pragma once

#include "composer/storage/object_store.h"

#include <torch/arg.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace composer {

struct RemoteUploaderOptions {
  /// Uploads running at once (worker threads).
  TORCH_ARG(int64_t, num_concurrent_uploads) = 2;
  /// Attempts per file for transient failures (each attempt also retries its requests: ObjectStoreOptions).
  TORCH_ARG(int64_t, num_attempts) = 3;
  /// Where files wait for their upload; empty: a fresh temporary folder, removed at close.
  TORCH_ARG(std::string, upload_staging_folder);
  /// How the store is reached.
  TORCH_ARG(ObjectStoreOptions, store);

 public:
  void validate() const;

 public:
  /// The keys a config sets; `store` has ObjectStoreOptions' own list.
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("num_concurrent_uploads", self.num_concurrent_uploads_, "uploads running at once");
    visit("num_attempts", self.num_attempts_, "attempts per file for transient failures");
    visit("upload_staging_folder", self.upload_staging_folder_,
          "where files wait for their upload; empty: a fresh temporary folder");
  }
};

/// Tasks run in the order they were queued, up to num_concurrent_uploads at a time; an *_after_pending task waits
/// until every earlier task has finished, and runs only if all of them succeeded (a checkpoint's "latest" pointer
/// goes up only after the checkpoint itself is complete; old checkpoints are deleted only after that). A failed
/// task is kept: check_workers() and wait() rethrow it as ObjectStoreError naming the file and the URI.
class RemoteUploader {
 public:
  /// `remote_folder` is a URI ("s3://bucket/run/checkpoints"); object names given to the calls below are keys in
  /// its bucket (Composer's convention). Throws std::invalid_argument for a local path or an unknown scheme.
  explicit RemoteUploader(const std::string& remote_folder, RemoteUploaderOptions options = RemoteUploaderOptions());
  /// Waits for queued tasks (errors are printed, not thrown) and removes the staging folder.
  ~RemoteUploader();
  RemoteUploader(const RemoteUploader&) = delete;
  RemoteUploader& operator=(const RemoteUploader&) = delete;

  /// Copies `file_path` to the staging folder and queues its upload to `remote_file_name`; a queued upload of the
  /// same name that has not started yet takes the new copy instead. Without overwrite an existing object is an
  /// error (reported by check_workers).
  void upload_file_async(const std::string& remote_file_name, const std::string& file_path, bool overwrite = false);
  /// The same, run only after every task queued before it succeeded.
  void upload_file_after_pending(const std::string& remote_file_name, const std::string& file_path);
  /// Deletes an object, after every task queued before it succeeded.
  void delete_file_after_pending(const std::string& remote_file_name);
  /// Throws the first failure since the last call, if any (the Trainer calls it after each batch).
  void check_workers();
  /// Blocks until every queued task has finished; then throws the first failure, if any.
  void wait();

  /// The URI of an object name.
  std::string get_uri(const std::string& remote_file_name) const { return store_->get_uri(remote_file_name); }
  /// The folder's path inside its bucket ("run/checkpoints").
  const std::string& path() const { return path_; }
  const std::string& remote_folder() const { return remote_folder_; }
  /// The store, for downloads and listings on the caller's thread.
  ObjectStore& remote_backend() { return *store_; }
  /// Object names uploaded so far, in completion order.
  std::vector<std::string> uploaded() const;
  /// Objects deleted so far.
  std::vector<std::string> deleted() const;

 private:
  enum class Kind { UPLOAD, DELETE };
  struct Task {
    int64_t id;
    Kind kind;
    std::string remote_file_name, staged_path;
    bool overwrite;
    bool after_pending;
  };
  /// Copies a file into the staging folder; returns its staged path.
  std::string stage(const std::string& remote_file_name, const std::string& file_path);
  void enqueue(Task task);
  void work();
  void run(const Task& task);
  /// Whether `task` may start now (lock held).
  bool ready(const Task& task) const;
  std::string remote_folder_, path_;
  RemoteUploaderOptions options_;
  std::unique_ptr<ObjectStore> store_;
  std::string staging_;
  bool own_staging_ = false;

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Task> queue_;
  std::vector<int64_t> running_;
  int64_t next_id_ = 0;
  bool stop_ = false;
  bool failed_ = false;
  std::vector<std::string> errors_;
  std::vector<std::string> uploaded_, deleted_;
  std::vector<std::thread> workers_;
};

}  // namespace composer
