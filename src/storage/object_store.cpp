#include "composer/storage/object_store.h"

#include "composer/storage/http_object_store.h"
#include "composer/storage/local_object_store.h"
#include "composer/storage/s3_object_store.h"

#include "storage/detail/local_files.h"

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <mutex>
#include <stdexcept>

namespace composer {

namespace fs = std::filesystem;

void ObjectStoreOptions::validate() const {
  auto bad = [](const std::string& field, const std::string& value, const std::string& expected) {
    throw std::invalid_argument("ObjectStoreOptions: " + field + " = " + value + ": expected " + expected);
  };
  if (!(timeout_ > 0)) bad("timeout", std::to_string(timeout_), "seconds > 0");
  if (!(connect_timeout_ > 0)) bad("connect_timeout", std::to_string(connect_timeout_), "seconds > 0");
  if (num_attempts_ < 1) bad("num_attempts", std::to_string(num_attempts_), ">= 1");
  if (part_size_ < (int64_t{5} << 20)) bad("part_size", std::to_string(part_size_), ">= 5 MiB (5242880), S3's minimum");
  if (max_concurrency_ < 1) bad("max_concurrency", std::to_string(max_concurrency_), ">= 1");
  if (multipart_threshold_ < 1) bad("multipart_threshold", std::to_string(multipart_threshold_), "bytes >= 1");
  if (!endpoint_url_.empty() && endpoint_url_.find("://") == std::string::npos)
    bad("endpoint_url", "'" + endpoint_url_ + "'", "a URL such as http://127.0.0.1:9000");
}

std::string ObjectStore::read_range(const std::string& object_name, int64_t offset, int64_t length) {
  static std::atomic<uint64_t> counter{0};
  const std::string tmp =
      (fs::temp_directory_path() / ("composer-range-" + std::to_string(::getpid()) + "-" + std::to_string(counter++)))
          .string();
  struct Removed {
    std::string path;
    ~Removed() {
      std::error_code ec;
      fs::remove(path, ec);
    }
  } removed{tmp};
  download_object(object_name, tmp, true);
  return detail::read_file_range(tmp, offset, length, get_uri(object_name));
}

bool ObjectStore::object_exists(const std::string& object_name) {
  try {
    get_object_size(object_name);
    return true;
  } catch (const ObjectNotFoundError&) {
    return false;
  }
}

ParsedUri parse_uri(const std::string& uri) {
  ParsedUri p;
  const auto sep = uri.find("://");
  if (sep == std::string::npos) {
    p.path = uri;
    return p;
  }
  p.backend = uri.substr(0, sep);
  const std::string rest = uri.substr(sep + 3);
  const auto slash = rest.find('/');
  p.bucket = rest.substr(0, slash);
  if (slash != std::string::npos) {
    p.path = rest.substr(slash);
    while (!p.path.empty() && p.path.front() == '/') p.path.erase(0, 1);
  }
  return p;
}

bool is_object_store_uri(const std::string& text) {
  // "s3:/bucket" or "s3:bucket" is a mistyped URI, not a local folder named "s3:".
  for (const char* scheme :
       {"s3", "gs", "oci", "azure", "wasb", "wasbs", "abfs", "abfss", "dbfs", "hf", "file", "http", "https"}) {
    const std::string prefix = std::string(scheme) + ":";
    if (text.size() > prefix.size() && text.compare(0, prefix.size(), prefix) == 0 &&
        text.compare(prefix.size(), 2, "//") != 0) {
      throw std::invalid_argument("'" + text + "' looks like a mistyped object-store URI; expected " + scheme +
                                  "://... (two slashes), or a local path without '" + prefix + "'");
    }
  }
  const auto sep = text.find("://");
  if (sep == std::string::npos || sep == 0) return false;
  for (size_t i = 0; i < sep; ++i)
    if (!std::isalnum(static_cast<unsigned char>(text[i])) && text[i] != '+' && text[i] != '-') return false;
  return true;
}

namespace {

std::mutex defaults_mutex;
ObjectStoreOptions& defaults() {
  static ObjectStoreOptions options;
  return options;
}

}  // namespace

void set_default_object_store_options(const ObjectStoreOptions& options) {
  options.validate();
  std::lock_guard<std::mutex> lock(defaults_mutex);
  defaults() = options;
}

ObjectStoreOptions default_object_store_options() {
  std::lock_guard<std::mutex> lock(defaults_mutex);
  return defaults();
}

std::unique_ptr<ObjectStore> make_object_store(const std::string& uri) {
  return make_object_store(uri, default_object_store_options());
}

std::unique_ptr<ObjectStore> make_object_store(const std::string& uri, const ObjectStoreOptions& options) {
  const ParsedUri p = parse_uri(uri);
  if (p.backend == "file") {
    if (!p.bucket.empty() && p.bucket != "localhost")
      throw std::invalid_argument("'" + uri + "': a file URI names no host (expected file:///absolute/path)");
    return std::make_unique<LocalObjectStore>("/");
  }
#if COMPOSER_WITH_OBJECT_STORES
  if (p.backend == "s3") {
    if (p.bucket.empty()) throw std::invalid_argument("'" + uri + "': no bucket (expected s3://bucket/path)");
    return std::make_unique<S3ObjectStore>(p.bucket, "", options);
  }
  if (p.backend == "http" || p.backend == "https") {
    if (p.bucket.empty())
      throw std::invalid_argument("'" + uri + "': no host (expected " + p.backend + "://host/path)");
    return std::make_unique<HttpObjectStore>(p.backend + "://" + p.bucket, options);
  }
#else
  (void)options;
  if (p.backend == "s3" || p.backend == "http" || p.backend == "https")
    throw std::invalid_argument("'" + uri + "': this build has no " + p.backend +
                                " object store (configure with -DCOMPOSER_WITH_OBJECT_STORES=ON and libcurl)");
#endif
  if (p.backend.empty()) throw std::invalid_argument("'" + uri + "' is a local path, not an object-store URI");
  throw std::invalid_argument("'" + uri + "': unknown object store '" + p.backend +
                              "://' (expected s3://, file://, http:// or https://)");
}

}  // namespace composer
