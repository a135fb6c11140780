#include "loggers/detail/http_client.h"

#include <curl/curl.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <utility>

namespace composer::detail {

namespace {

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

size_t append_body(char* data, size_t size, size_t count, void* out) {
  static_cast<std::string*>(out)->append(data, size * count);
  return size * count;
}

}  // namespace

HttpClient::HttpClient(double timeout_s, int attempts, HttpAuth auth)
    : timeout_s_(timeout_s), attempts_(attempts < 1 ? 1 : attempts), auth_(std::move(auth)) {
  global_init();
}

std::string HttpClient::escape(const std::string& text) {
  global_init();
  char* out = curl_easy_escape(nullptr, text.c_str(), static_cast<int>(text.size()));
  std::string s = out ? out : "";
  curl_free(out);
  return s;
}

HttpResponse HttpClient::request(const std::string& method, const std::string& url, const std::string& body,
                                 const std::string& content_type) const {
  return perform(method, url, body.empty() ? nullptr : &body, content_type, nullptr);
}

HttpResponse HttpClient::put_file(const std::string& url, const std::string& path) const {
  return perform("PUT", url, nullptr, "application/octet-stream", &path);
}

HttpResponse HttpClient::perform(const std::string& method, const std::string& url, const std::string* body,
                                 const std::string& content_type, const std::string* file) const {
  HttpResponse r;
  for (int attempt = 0; attempt < attempts_; ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(500 << (attempt - 1)));
    std::unique_ptr<CURL, void (*)(CURL*)> curl(curl_easy_init(), curl_easy_cleanup);
    if (!curl) throw std::runtime_error("HttpClient: curl_easy_init failed");
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> in(nullptr, std::fclose);
    curl_slist* headers = nullptr;
    r = HttpResponse();
    curl_easy_setopt(curl.get(), CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl.get(), CURLOPT_CUSTOMREQUEST, method.c_str());
    curl_easy_setopt(curl.get(), CURLOPT_TIMEOUT_MS, static_cast<long>(timeout_s_ * 1000));
    curl_easy_setopt(curl.get(), CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl.get(), CURLOPT_WRITEFUNCTION, append_body);
    curl_easy_setopt(curl.get(), CURLOPT_WRITEDATA, &r.body);
    if (body) {
      curl_easy_setopt(curl.get(), CURLOPT_POSTFIELDS, body->data());
      curl_easy_setopt(curl.get(), CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body->size()));
    }
    if (file) {
      in.reset(std::fopen(file->c_str(), "rb"));
      if (!in) throw std::runtime_error("HttpClient: cannot read '" + *file + "' to upload it");
      std::fseek(in.get(), 0, SEEK_END);
      const long size = std::ftell(in.get());
      std::fseek(in.get(), 0, SEEK_SET);
      curl_easy_setopt(curl.get(), CURLOPT_UPLOAD, 1L);
      curl_easy_setopt(curl.get(), CURLOPT_READDATA, in.get());
      curl_easy_setopt(curl.get(), CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(size));
    }
    if (body || file) headers = curl_slist_append(headers, ("Content-Type: " + content_type).c_str());
    headers = curl_slist_append(headers, "Expect:");
    if (!auth_.username.empty() && !auth_.password.empty()) {
      curl_easy_setopt(curl.get(), CURLOPT_HTTPAUTH, static_cast<long>(CURLAUTH_BASIC));
      curl_easy_setopt(curl.get(), CURLOPT_USERNAME, auth_.username.c_str());
      curl_easy_setopt(curl.get(), CURLOPT_PASSWORD, auth_.password.c_str());
    } else if (!auth_.token.empty()) {
      headers = curl_slist_append(headers, ("Authorization: Bearer " + auth_.token).c_str());
    }
    curl_easy_setopt(curl.get(), CURLOPT_HTTPHEADER, headers);
    const CURLcode code = curl_easy_perform(curl.get());
    curl_slist_free_all(headers);
    if (code != CURLE_OK) {
      r.error = curl_easy_strerror(code);
      continue;
    }
    curl_easy_getinfo(curl.get(), CURLINFO_RESPONSE_CODE, &r.status);
    if (r.status < 500) return r;
  }
  return r;
}

}  // namespace composer::detail
