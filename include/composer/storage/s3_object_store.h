// S3ObjectStore: an S3 bucket, or a bucket of an S3-compatible service, over libcurl, which signs each request with
// AWS Signature Version 4 itself (CURLOPT_AWS_SIGV4).
#pragma once

#include "composer/storage/object_store.h"

#include <string>

namespace composer {

namespace detail {
struct CurlRequest;
struct CurlResponse;
}  // namespace detail

/// Credentials come from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (/ AWS_SESSION_TOKEN), else from the profile in
/// ~/.aws/credentials; with none, requests go unsigned (public buckets). With an endpoint the URLs are path-style
/// (endpoint/bucket/key), else virtual-hosted (https://bucket.s3.region.amazonaws.com/key). Uploads of at least
/// multipart_threshold bytes go up in parts and are aborted on failure, so a bucket never holds a partial object.
/// Errors name the bucket and the key: a missing bucket, a missing object, refused credentials (with the service's
/// code, e.g. InvalidAccessKeyId or SignatureDoesNotMatch), an unreachable endpoint.
class S3ObjectStore : public ObjectStore {
 public:
  /// `prefix` is put in front of every object name ("folder/sub/"); a trailing '/' is added when missing.
  explicit S3ObjectStore(std::string bucket, std::string prefix = "",
                         ObjectStoreOptions options = ObjectStoreOptions());
  std::string get_uri(const std::string& object_name) const override;
  void upload_object(const std::string& object_name, const std::string& filename) override;
  void download_object(const std::string& object_name, const std::string& filename, bool overwrite = false) override;
  int64_t get_object_size(const std::string& object_name) override;
  std::string read_range(const std::string& object_name, int64_t offset, int64_t length) override;
  bool reads_ranges() const override { return true; }
  std::vector<ObjectInfo> list_objects(const std::string& prefix = "") override;
  void delete_object(const std::string& object_name) override;

  const std::string& bucket() const { return bucket_; }
  /// The endpoint requests go to (after the environment was read).
  const std::string& endpoint() const { return endpoint_; }
  const std::string& region() const { return region_; }

 private:
  struct Credentials {
    std::string access_key, secret_key, session_token;
  };
  std::string key(const std::string& object_name) const { return prefix_ + object_name; }
  /// The URL of the bucket (key empty) or of one object, with an optional query ("a=1&b=2", sorted and escaped).
  std::string url(const std::string& key, const std::string& query = "") const;
  void upload_multipart(const std::string& key, const std::string& filename, int64_t size);
  /// Signs and sends a request, retrying transient failures; returns the last answer.
  detail::CurlResponse send(detail::CurlRequest request) const;
  /// Throws the error that answer `r` means for "<what> <uri>".
  [[noreturn]] void fail(const std::string& what, const std::string& uri, const detail::CurlResponse& r) const;
  std::string bucket_, prefix_, endpoint_, region_;
  bool path_style_ = true;
  Credentials credentials_;
  ObjectStoreOptions options_;
};

}  // namespace composer
