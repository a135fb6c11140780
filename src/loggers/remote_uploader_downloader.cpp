#include "composer/loggers/remote_uploader_downloader.h"

#include "composer/core/format_name.h"
#include "composer/core/state.h"
#include "composer/dist/env.h"
#include "composer/storage/remote_uploader.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <stdexcept>

namespace composer {

namespace fs = std::filesystem;

void RemoteUploaderDownloaderOptions::validate() const {
  if (bucket_uri_.empty())
    throw std::invalid_argument("RemoteUploaderDownloader: bucket_uri is required (e.g. s3://my-bucket)");
  if (!is_object_store_uri(bucket_uri_))
    throw std::invalid_argument("RemoteUploaderDownloader: bucket_uri = '" + bucket_uri_ +
                                "': expected an object-store URI such as s3://my-bucket");
  if (num_concurrent_uploads_ < 1)
    throw std::invalid_argument("RemoteUploaderDownloader: num_concurrent_uploads = " +
                                std::to_string(num_concurrent_uploads_) + ": expected >= 1");
  if (num_attempts_ < 1)
    throw std::invalid_argument("RemoteUploaderDownloader: num_attempts = " + std::to_string(num_attempts_) +
                                ": expected >= 1");
}

RemoteUploaderDownloader::RemoteUploaderDownloader(RemoteUploaderDownloaderOptions options)
    : options_(std::move(options)) {
  options_.validate();
  make_object_store(options_.bucket_uri());  // an unknown scheme is an error here, not at the first upload
}

RemoteUploaderDownloader::~RemoteUploaderDownloader() = default;

std::string RemoteUploaderDownloader::object_name(const std::string& remote_file_name) const {
  if (run_name_.empty())
    throw std::logic_error("RemoteUploaderDownloader: the run name is set at INIT; upload_file came before it");
  std::string pattern = options_.file_path_format_string();
  const std::string var = "{remote_file_name}";
  for (auto pos = pattern.find(var); pos != std::string::npos; pos = pattern.find(var, pos + remote_file_name.size()))
    pattern.replace(pos, var.size(), remote_file_name);
  std::string name = format_name_with_dist(pattern, run_name_);
  while (!name.empty() && name.front() == '/') name.erase(0, 1);
  return name;
}

std::string RemoteUploaderDownloader::get_uri_for_file(const std::string& remote_file_name) const {
  return make_object_store(options_.bucket_uri())->get_uri(object_name(remote_file_name));
}

void RemoteUploaderDownloader::init(State& state, Logger&) {
  run_name_ = state.run_name;
  uploader_ = std::make_unique<RemoteUploader>(options_.bucket_uri(),
                                               RemoteUploaderOptions()
                                                   .num_concurrent_uploads(options_.num_concurrent_uploads())
                                                   .num_attempts(options_.num_attempts())
                                                   .upload_staging_folder(options_.upload_staging_folder()));
  if (dist::get_global_rank() != 0) return;
  // Composer's validate_credentials: a tiny object written now, so refused credentials end the run before training.
  const fs::path probe = fs::temp_directory_path() / (".composer-credentials-" + std::to_string(::getpid()));
  std::ofstream(probe) << "credentials validated successfully by " << run_name_ << "\n";
  std::error_code ec;
  try {
    uploader_->remote_backend().upload_object(object_name(".credentials_validated_successfully"), probe.string());
  } catch (...) {
    fs::remove(probe, ec);
    throw;
  }
  fs::remove(probe, ec);
}

void RemoteUploaderDownloader::upload_file(const std::string& remote_file_name, const std::string& file_path,
                                           bool overwrite) {
  if (!uploader_) throw std::logic_error("RemoteUploaderDownloader: upload_file before INIT");
  uploader_->upload_file_async(object_name(remote_file_name), file_path, overwrite);
}

void RemoteUploaderDownloader::download_file(const std::string& remote_file_name, const std::string& destination,
                                             bool overwrite) {
  make_object_store(options_.bucket_uri())->download_object(object_name(remote_file_name), destination, overwrite);
}

void RemoteUploaderDownloader::batch_end(State&, Logger&) {
  if (uploader_) uploader_->check_workers();
}

void RemoteUploaderDownloader::epoch_end(State&, Logger&) {
  if (uploader_) uploader_->check_workers();
}

void RemoteUploaderDownloader::wait_for_uploads() {
  if (uploader_) uploader_->wait();
}

void RemoteUploaderDownloader::close(State&, Logger&) {
  if (!uploader_) return;
  uploader_->wait();
  std::cerr << "composer: RemoteUploaderDownloader uploaded " << uploader_->uploaded().size() << " file(s) to "
            << options_.bucket_uri() << "\n";
}

}  // namespace composer
