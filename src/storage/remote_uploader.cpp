#include "composer/storage/remote_uploader.h"

#include "storage/detail/curl_transfer.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <iostream>
#include <random>
#include <regex>
#include <stdexcept>

namespace composer {

namespace fs = std::filesystem;

void RemoteUploaderOptions::validate() const {
  if (num_concurrent_uploads_ < 1)
    throw std::invalid_argument("RemoteUploaderOptions: num_concurrent_uploads = " +
                                std::to_string(num_concurrent_uploads_) + ": expected >= 1");
  if (num_attempts_ < 1)
    throw std::invalid_argument("RemoteUploaderOptions: num_attempts = " + std::to_string(num_attempts_) +
                                ": expected >= 1");
  store_.validate();
}

namespace {

// The staging folders of processes that are gone (a SIGKILLed run never reaches its destructor): composer-uploads-
// <pid>-<n> in the temporary folder, whose pid no longer runs.
void remove_abandoned_staging_folders() {
  static const std::regex staging(R"(^composer-uploads-(\d+)-\d+$)");
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(fs::temp_directory_path(), ec)) {
    std::smatch m;
    const std::string name = entry.path().filename().string();
    if (!std::regex_match(name, m, staging)) continue;
    const long pid = std::stol(m[1].str());
    if (pid <= 0 || pid == ::getpid() || ::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    std::error_code ignored;
    fs::remove_all(entry.path(), ignored);
  }
}

}  // namespace

RemoteUploader::RemoteUploader(const std::string& remote_folder, RemoteUploaderOptions options)
    : remote_folder_(remote_folder), path_(parse_uri(remote_folder).path), options_(std::move(options)) {
  options_.validate();
  if (!is_object_store_uri(remote_folder))
    throw std::invalid_argument("RemoteUploader: '" + remote_folder +
                                "' is not an object-store URI (expected s3://...)");
  store_ = make_object_store(remote_folder, options_.store());
  if (!store_->writable())
    throw std::invalid_argument("RemoteUploader: '" + remote_folder +
                                "' is read-only (HTTP); expected s3:// or file://");
  staging_ = options_.upload_staging_folder();
  if (staging_.empty()) {
    remove_abandoned_staging_folders();
    std::random_device rd;
    staging_ =
        (fs::temp_directory_path() / ("composer-uploads-" + std::to_string(::getpid()) + "-" + std::to_string(rd())))
            .string();
    own_staging_ = true;
  }
  fs::create_directories(staging_);
  for (int64_t i = 0; i < options_.num_concurrent_uploads(); ++i) workers_.emplace_back([this] { work(); });
}

RemoteUploader::~RemoteUploader() {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return queue_.empty() && running_.empty(); });
    stop_ = true;
  }
  changed_.notify_all();
  for (auto& w : workers_) w.join();
  for (const auto& e : errors_) std::cerr << "RemoteUploader: " << e << "\n";
  std::error_code ec;
  if (own_staging_) fs::remove_all(staging_, ec);
}

void RemoteUploader::enqueue(Task task) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // A file logged again before its upload started replaces the queued copy (Composer keeps the newest too).
    if (task.kind == Kind::UPLOAD && !task.after_pending) {
      for (auto& queued : queue_) {
        if (queued.kind == Kind::UPLOAD && !queued.after_pending && queued.remote_file_name == task.remote_file_name) {
          std::error_code ec;
          fs::remove(queued.staged_path, ec);
          queued.staged_path = task.staged_path;
          queued.overwrite = task.overwrite;
          return;
        }
      }
    }
    task.id = next_id_++;
    queue_.push_back(std::move(task));
  }
  changed_.notify_all();
}

std::string RemoteUploader::stage(const std::string& remote_file_name, const std::string& file_path) {
  std::random_device rd;
  const std::string staged =
      (fs::path(staging_) / (std::to_string(rd()) + "-" + fs::path(file_path).filename().string())).string();
  std::error_code ec;
  fs::copy_file(file_path, staged, fs::copy_options::overwrite_existing, ec);
  if (ec)
    throw ObjectStoreError("uploading '" + file_path + "' to " + get_uri(remote_file_name) +
                           " failed: cannot stage it in '" + staging_ + "': " + ec.message());
  return staged;
}

void RemoteUploader::upload_file_async(const std::string& remote_file_name, const std::string& file_path,
                                       bool overwrite) {
  enqueue({0, Kind::UPLOAD, remote_file_name, stage(remote_file_name, file_path), overwrite, false});
}

void RemoteUploader::upload_file_after_pending(const std::string& remote_file_name, const std::string& file_path) {
  enqueue({0, Kind::UPLOAD, remote_file_name, stage(remote_file_name, file_path), true, true});
}

void RemoteUploader::delete_file_after_pending(const std::string& remote_file_name) {
  enqueue({0, Kind::DELETE, remote_file_name, "", true, true});
}

bool RemoteUploader::ready(const Task& task) const {
  // Ordered tasks wait for everything before them; others wait only for an ordered task before them.
  for (const auto& t : queue_) {
    if (t.id >= task.id) break;
    if (task.after_pending || t.after_pending) return false;
  }
  return task.after_pending ? running_.empty() : std::none_of(running_.begin(), running_.end(), [&](int64_t id) {
    return id < 0;  // a running ordered task is stored negated
  });
}

void RemoteUploader::work() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    auto next = queue_.end();
    changed_.wait(lock, [&] {
      if (stop_) return true;
      next = std::find_if(queue_.begin(), queue_.end(), [&](const Task& t) { return ready(t); });
      return next != queue_.end();
    });
    if (stop_ && queue_.empty()) return;
    if (next == queue_.end()) continue;
    const Task task = *next;
    queue_.erase(next);
    const int64_t tag = task.after_pending ? -(task.id + 1) : task.id;
    running_.push_back(tag);
    const bool skip = task.after_pending && failed_;
    lock.unlock();
    std::string error;
    if (skip) {
      error = (task.kind == Kind::UPLOAD ? "not uploading " : "not deleting ") + get_uri(task.remote_file_name) +
              ": an earlier upload failed";
    } else {
      try {
        run(task);
      } catch (const std::exception& e) {
        error = e.what();
      }
    }
    std::error_code ec;
    if (!task.staged_path.empty()) fs::remove(task.staged_path, ec);
    lock.lock();
    running_.erase(std::find(running_.begin(), running_.end(), tag));
    if (!error.empty()) {
      failed_ = true;
      errors_.push_back(error);
    } else if (task.kind == Kind::UPLOAD) {
      uploaded_.push_back(task.remote_file_name);
    } else {
      deleted_.push_back(task.remote_file_name);
    }
    changed_.notify_all();
  }
}

void RemoteUploader::run(const Task& task) {
  if (task.kind == Kind::DELETE) {
    store_->delete_object(task.remote_file_name);
    return;
  }
  if (!task.overwrite && store_->object_exists(task.remote_file_name))
    throw ObjectStoreError("uploading to " + get_uri(task.remote_file_name) +
                           " refused: the object already exists and overwrite is false");
  for (int64_t attempt = 0;; ++attempt) {
    try {
      store_->upload_object(task.remote_file_name, task.staged_path);
      return;
    } catch (const ObjectStoreTransientError&) {
      if (attempt + 1 >= options_.num_attempts()) throw;
      detail::backoff(static_cast<int>(attempt + 1));
    }
  }
}

void RemoteUploader::check_workers() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (errors_.empty()) return;
  std::string message = errors_.front();
  if (errors_.size() > 1) message += " (and " + std::to_string(errors_.size() - 1) + " more)";
  errors_.clear();
  throw ObjectStoreError(message);
}

void RemoteUploader::wait() {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return queue_.empty() && running_.empty(); });
  }
  check_workers();
}

std::vector<std::string> RemoteUploader::uploaded() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return uploaded_;
}

std::vector<std::string> RemoteUploader::deleted() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return deleted_;
}

}  // namespace composer
