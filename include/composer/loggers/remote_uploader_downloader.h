// RemoteUploaderDownloader: a logger destination that uploads the files a run logs (checkpoints through
// CheckpointSaverOptions::remote_file_name, FileLogger's log files, traces) to an object store in the background, as
// Composer's RemoteUploaderDownloader; and downloads them back (autoresume).
#pragma once

#include "composer/core/logger.h"

#include <torch/arg.h>

#include <memory>
#include <string>

namespace composer {

class RemoteUploader;

struct RemoteUploaderDownloaderOptions {
  /// The bucket, e.g. "s3://my-bucket" (or "file:///shared/folder"). Required.
  TORCH_ARG(std::string, bucket_uri);
  /// The object name of each file: {remote_file_name} (the name it was logged under), {run_name}, {rank},
  /// {local_rank}, {world_size}, {local_world_size}, {node_rank}. Leading '/' are stripped.
  TORCH_ARG(std::string, file_path_format_string) = "{remote_file_name}";
  /// Uploads running at once.
  TORCH_ARG(int64_t, num_concurrent_uploads) = 1;
  /// Where files wait for their upload; empty: a temporary folder.
  TORCH_ARG(std::string, upload_staging_folder);
  /// Attempts per file for transient failures.
  TORCH_ARG(int64_t, num_attempts) = 3;

 public:
  /// Throws std::invalid_argument naming the bad field.
  void validate() const;
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("bucket_uri", self.bucket_uri_, "the bucket, e.g. s3://my-bucket (required)");
    visit("file_path_format_string", self.file_path_format_string_,
          "object name of each file ({remote_file_name}, {run_name}, {rank}, ...)");
    visit("num_concurrent_uploads", self.num_concurrent_uploads_, "uploads running at once");
    visit("upload_staging_folder", self.upload_staging_folder_, "folder files wait in; empty: a temporary folder");
    visit("num_attempts", self.num_attempts_, "attempts per file for transient failures");
  }
};

/// At INIT rank 0 uploads a small ".credentials_validated_successfully" object, so a wrong bucket or refused
/// credentials stop the run before training with a message naming the bucket. A file logged again under the same
/// name before its upload started replaces the queued copy. Failed uploads stop the run at the next BATCH_END or
/// EPOCH_END; close() waits for every pending upload and reports how many went up.
class RemoteUploaderDownloader : public LoggerDestination {
 public:
  explicit RemoteUploaderDownloader(RemoteUploaderDownloaderOptions options);
  ~RemoteUploaderDownloader() override;
  void init(State& state, Logger& logger) override;
  void batch_end(State& state, Logger& logger) override;
  void epoch_end(State& state, Logger& logger) override;
  void close(State& state, Logger& logger) override;
  bool can_upload_files() const override { return true; }
  void upload_file(const std::string& remote_file_name, const std::string& file_path, bool overwrite) override;

  /// Downloads a logged file back (by the name it was logged under) to `destination`. Throws ObjectNotFoundError
  /// when it was never uploaded.
  void download_file(const std::string& remote_file_name, const std::string& destination, bool overwrite = false);
  /// The object URI a logged name maps to.
  std::string get_uri_for_file(const std::string& remote_file_name) const;
  /// Blocks until every queued upload finished; throws the first failure.
  void wait_for_uploads();
  const RemoteUploaderDownloaderOptions& options() const { return options_; }

 private:
  std::string object_name(const std::string& remote_file_name) const;
  RemoteUploaderDownloaderOptions options_;
  std::string run_name_;
  std::unique_ptr<RemoteUploader> uploader_;
};

}  // namespace composer
