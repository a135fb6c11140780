// One HTTP request over libcurl, the library's one HTTP client (the object stores, and the loggers' REST calls through
// loggers/detail/http_client.h): a body from memory or a byte range of a file, the answer into memory or a file,
// response headers kept, optional AWS Signature V4 (signed by libcurl) or HTTP basic authentication.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace composer::detail {

struct CurlRequest {
  std::string method = "GET";
  std::string url;
  std::vector<std::string> headers;  // "Name: value"
  /// The body, from memory (body) or from upload_file's bytes [upload_offset, upload_offset + upload_size).
  std::string body;
  std::string upload_file;
  int64_t upload_offset = 0;
  int64_t upload_size = -1;  // -1: to the end of the file
  /// When set, a 2xx answer's body goes to this file (opened for writing, truncated) instead of into memory.
  std::string download_file;
  /// "aws:amz:<region>:s3" and "key:secret" sign the request; empty: unsigned.
  std::string aws_sigv4;
  std::string user_pwd;
  /// Without aws_sigv4: user_pwd ("user:password") sent as HTTP basic authentication.
  bool basic_auth = false;
  double timeout_s = 120.0;
  double connect_timeout_s = 10.0;
};

struct CurlResponse {
  long status = 0;                             // the HTTP status; 0 when no answer came
  std::string error;                           // libcurl's reason when status is 0
  std::string body;                            // the answer (error bodies too, when download_file is set)
  std::map<std::string, std::string> headers;  // lower-cased names
  /// Whether the failure may pass: no answer, 5xx, 429, or S3's throttling codes.
  bool transient() const;
};

/// Performs the request once (the callers retry). Throws std::runtime_error when a local file cannot be read or
/// written.
CurlResponse perform(const CurlRequest& request);
/// perform() with `timeout_s` / `connect_timeout_s` set, retried while the answer is transient, at most `attempts`
/// times with backoff() in between; returns the last answer. Each retry says so on stderr, naming `what` (the caller:
/// "object store", "MLflow").
CurlResponse perform_with_retries(CurlRequest request, double timeout_s, double connect_timeout_s, int64_t attempts,
                                  const std::string& what = "object store");
/// The header asking for bytes [offset, offset + length) ("Range: bytes=first-last"; length > 0).
std::string range_header(int64_t offset, int64_t length);
/// The bytes [offset, offset + length) of an answer to a range request: its body when the server sent the range
/// (206), or the range cut from the whole object when it ignored the header (200). Throws ObjectStoreError naming
/// `uri` when the range lies past the object's end (416, or a short body).
std::string ranged_body(const CurlResponse& r, int64_t offset, int64_t length, const std::string& uri);
/// Percent-encodes text (RFC 3986 unreserved characters stay); keep_slash leaves '/' as is (object keys in paths).
std::string uri_escape(const std::string& text, bool keep_slash);
/// Waits before attempt `attempt` (1-based after the first): 0.5 s, 1 s, 2 s, ... capped at 8 s.
void backoff(int attempt);

}  // namespace composer::detail
