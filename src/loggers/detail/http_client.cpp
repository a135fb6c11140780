// HttpClient over the library's one libcurl client (storage/detail/curl_transfer.h): JSON bodies, file uploads, and
// MLflow's credentials.
#include "loggers/detail/http_client.h"

#include "storage/detail/curl_transfer.h"

#include <algorithm>
#include <utility>

namespace composer::detail {

HttpClient::HttpClient(double timeout_s, int attempts, HttpAuth auth)
    : timeout_s_(timeout_s), attempts_(attempts < 1 ? 1 : attempts), auth_(std::move(auth)) {}

std::string HttpClient::escape(const std::string& text) { return uri_escape(text, /*keep_slash=*/false); }

HttpResponse HttpClient::request(const std::string& method, const std::string& url, const std::string& body,
                                 const std::string& content_type) const {
  return perform(method, url, body.empty() ? nullptr : &body, content_type, nullptr);
}

HttpResponse HttpClient::put_file(const std::string& url, const std::string& path) const {
  return perform("PUT", url, nullptr, "application/octet-stream", &path);
}

HttpResponse HttpClient::perform(const std::string& method, const std::string& url, const std::string* body,
                                 const std::string& content_type, const std::string* file) const {
  CurlRequest r;
  r.method = method;
  r.url = url;
  if (body) r.body = *body;
  if (file) r.upload_file = *file;
  if (body || file) r.headers.push_back("Content-Type: " + content_type);
  if (!auth_.username.empty() && !auth_.password.empty()) {
    r.basic_auth = true;
    r.user_pwd = auth_.username + ":" + auth_.password;
  } else if (!auth_.token.empty()) {
    r.headers.push_back("Authorization: Bearer " + auth_.token);
  }
  const CurlResponse answer = perform_with_retries(r, timeout_s_, std::min(10.0, timeout_s_), attempts_, "MLflow");
  return {answer.status, answer.body, answer.error};
}

}  // namespace composer::detail
