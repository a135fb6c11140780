// HttpClient: blocking HTTP requests over libcurl, for loggers that talk to REST services (MLFlowLogger).
#pragma once

#include <string>

namespace composer::detail {

struct HttpResponse {
  long status = 0;  // the HTTP status, 0 when no response came (connection refused, timeout)
  std::string body;
  std::string error;  // libcurl's reason when status is 0
};

/// Credentials sent with every request, chosen as MLflow's client chooses: a user name and a password (HTTP basic
/// authentication) when both are set, else a bearer token ("Authorization: Bearer <token>"); none when all are empty.
struct HttpAuth {
  std::string token;
  std::string username;
  std::string password;
};

class HttpClient {
 public:
  /// timeout_s bounds each attempt; attempts > 1 retries connection failures and 5xx answers, waiting 0.5 s, 1 s, ...
  explicit HttpClient(double timeout_s = 30.0, int attempts = 3, HttpAuth auth = {});
  /// method: GET, POST, PUT, PATCH or DELETE. content_type is sent when body is not empty.
  HttpResponse request(const std::string& method, const std::string& url, const std::string& body = "",
                       const std::string& content_type = "application/json") const;
  /// PUT of a file's bytes (streamed from disk). Throws std::runtime_error when the file cannot be read.
  HttpResponse put_file(const std::string& url, const std::string& path) const;
  /// Percent-encodes a query value or a path segment.
  static std::string escape(const std::string& text);

 private:
  HttpResponse perform(const std::string& method, const std::string& url, const std::string* body,
                       const std::string& content_type, const std::string* file) const;
  double timeout_s_;
  int attempts_;
  HttpAuth auth_;
};

}  // namespace composer::detail
