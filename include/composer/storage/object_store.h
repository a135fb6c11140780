// ObjectStore: one interface over the places a run keeps files outside its machine (Composer's
// composer.utils.object_store): S3 and S3-compatible services (s3://), local folders (file://) and read-only HTTP(S)
// servers (http://, https://). make_object_store() picks the backend from a URI.
#pragma once

#include <torch/arg.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace composer {

/// A failed object-store operation. The message names the object's URI and the cause in a line or two.
class ObjectStoreError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
/// The object (or its bucket) does not exist. Composer raises FileNotFoundError here.
class ObjectNotFoundError : public ObjectStoreError {
 public:
  using ObjectStoreError::ObjectStoreError;
};
/// A failure that may pass: the server unreachable, a timeout, a 5xx answer, throttling (Composer's
/// ObjectStoreTransientError). Operations retry these themselves up to num_attempts before throwing.
class ObjectStoreTransientError : public ObjectStoreError {
 public:
  using ObjectStoreError::ObjectStoreError;
};

/// How stores reach their service. Empty strings read the standard AWS environment and files.
struct ObjectStoreOptions {
  /// An S3-compatible endpoint such as "http://127.0.0.1:9000" (MinIO, R2, OCI, GCS interoperability). Empty:
  /// $AWS_ENDPOINT_URL_S3, $AWS_ENDPOINT_URL or $S3_ENDPOINT_URL (Composer's variable), else Amazon S3.
  TORCH_ARG(std::string, endpoint_url);
  /// The signing region. Empty: $AWS_REGION, $AWS_DEFAULT_REGION, the profile's region in ~/.aws/config, else
  /// us-east-1.
  TORCH_ARG(std::string, region);
  /// The credentials profile read from ~/.aws/credentials ($AWS_SHARED_CREDENTIALS_FILE) when the environment has no
  /// AWS_ACCESS_KEY_ID. Empty: $AWS_PROFILE, else "default".
  TORCH_ARG(std::string, profile);
  /// Seconds one request may take before it is abandoned and retried (uploads of a part, downloads, listings).
  TORCH_ARG(double, timeout) = 120.0;
  /// Seconds to wait for a connection.
  TORCH_ARG(double, connect_timeout) = 10.0;
  /// Attempts per request for transient failures, waiting 0.5 s, 1 s, 2 s, ... (capped at 8 s) in between.
  TORCH_ARG(int64_t, num_attempts) = 5;
  /// Files of at least this many bytes go up in parts (S3 multipart upload).
  TORCH_ARG(int64_t, multipart_threshold) = int64_t{64} << 20;
  /// The size of each part but the last (S3 requires at least 5 MiB).
  TORCH_ARG(int64_t, part_size) = int64_t{16} << 20;
  /// Parts of one multipart upload sent at once.
  TORCH_ARG(int64_t, max_concurrency) = 4;

 public:
  /// Throws std::invalid_argument naming the bad field.
  void validate() const;
  template <class Self, class Visit>
  static void for_each_field(Self& self, Visit&& visit) {
    visit("endpoint_url", self.endpoint_url_, "S3-compatible endpoint; empty: $AWS_ENDPOINT_URL or $S3_ENDPOINT_URL");
    visit("region", self.region_, "signing region; empty: $AWS_REGION, ~/.aws/config, us-east-1");
    visit("profile", self.profile_, "credentials profile; empty: $AWS_PROFILE or 'default'");
    visit("timeout", self.timeout_, "seconds per request before it is retried");
    visit("connect_timeout", self.connect_timeout_, "seconds to wait for a connection");
    visit("num_attempts", self.num_attempts_, "attempts per request for transient failures");
    visit("multipart_threshold", self.multipart_threshold_, "files of at least this many bytes upload in parts");
    visit("part_size", self.part_size_, "bytes per part of a multipart upload (>= 5 MiB)");
    visit("max_concurrency", self.max_concurrency_, "parts of one multipart upload sent at once");
  }
};

/// One object of a listing.
struct ObjectInfo {
  std::string name;
  int64_t size = 0;
};

/// Names are '/'-separated keys relative to the store (a bucket, a folder). Every operation is safe to call from
/// several threads at once.
class ObjectStore {
 public:
  virtual ~ObjectStore() = default;
  /// The URI of `object_name`, e.g. "s3://bucket/run/ep1.pt"; used in every message.
  virtual std::string get_uri(const std::string& object_name) const = 0;
  /// Uploads a local file to `object_name`, replacing any object there. Readers see the old object or all of the new
  /// one, never a part. Throws ObjectStoreError naming the URI (after retries for transient failures).
  virtual void upload_object(const std::string& object_name, const std::string& filename) = 0;
  /// Downloads `object_name` to `filename` through a temporary file beside it, so `filename` appears only complete.
  /// Without overwrite an existing `filename` is an error. Throws ObjectNotFoundError when the object is missing.
  virtual void download_object(const std::string& object_name, const std::string& filename, bool overwrite = false) = 0;
  /// The object's size in bytes; ObjectNotFoundError when it is missing.
  virtual int64_t get_object_size(const std::string& object_name) = 0;
  /// Bytes [offset, offset + length) of the object, so that a reader needing part of an object (a rank's chunks of a
  /// sharded checkpoint's file) fetches only that part. ObjectNotFoundError when the object is missing,
  /// ObjectStoreError when the range lies past its end. This default downloads the whole object to a temporary file
  /// and reads the range from it; stores with ranged reads (S3 and HTTP: a Range request; local) override it and
  /// say so in reads_ranges().
  virtual std::string read_range(const std::string& object_name, int64_t offset, int64_t length);
  /// Whether read_range fetches only the range (then readers prefer it to downloading whole objects).
  virtual bool reads_ranges() const { return false; }
  /// Objects whose names start with `prefix`, sorted by name.
  virtual std::vector<ObjectInfo> list_objects(const std::string& prefix = "") = 0;
  /// Deletes an object; a missing one is not an error.
  virtual void delete_object(const std::string& object_name) = 0;
  /// Whether the object exists.
  bool object_exists(const std::string& object_name);
  /// Whether uploads and deletes are possible (HTTP stores are read-only).
  virtual bool writable() const { return true; }
};

/// A URI split as Composer's parse_uri does: "s3://bucket/a/b" -> {"s3", "bucket", "a/b"}; a plain path has an
/// empty backend and the whole text as path.
struct ParsedUri {
  std::string backend;
  std::string bucket;
  std::string path;
};
ParsedUri parse_uri(const std::string& uri);
/// Whether `text` names an object store ("scheme://..."), not a local path. Throws std::invalid_argument naming the
/// text when it starts with a known scheme and a colon but not "://" ("s3:/bucket/x"): a mistyped URI must not become a
/// local folder.
bool is_object_store_uri(const std::string& text);

/// The store for a URI's backend and bucket: s3:// (S3ObjectStore for the bucket), file:// (LocalObjectStore at "/"),
/// http:// and https:// (HttpObjectStore for the host). Object names are then parse_uri(uri).path. Throws
/// std::invalid_argument naming the URI for an unknown scheme or a missing bucket.
std::unique_ptr<ObjectStore> make_object_store(const std::string& uri, const ObjectStoreOptions& options);
/// The same with the process's default options (default_object_store_options()): what every store the library makes
/// for a URI gets (save_folder, load_path, streaming remotes, RemoteUploaderDownloader, export_for_inference).
std::unique_ptr<ObjectStore> make_object_store(const std::string& uri);

/// The options make_object_store(uri) uses: ObjectStoreOptions() until set. `composer-cpp train` sets them from the
/// config's `object_store:` section. Validated when set (std::invalid_argument naming the field).
void set_default_object_store_options(const ObjectStoreOptions& options);
ObjectStoreOptions default_object_store_options();

}  // namespace composer
