#include "storage/detail/curl_transfer.h"

#include "composer/storage/object_store.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>

namespace composer::detail {

namespace {

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct Sink {
  std::string* memory = nullptr;
  std::FILE* file = nullptr;
  long* status = nullptr;
  CURL* curl = nullptr;
  bool write_failed = false;
};

size_t write_body(char* data, size_t size, size_t count, void* out) {
  auto* sink = static_cast<Sink*>(out);
  const size_t n = size * count;
  if (sink->file) {
    long status = 0;
    curl_easy_getinfo(sink->curl, CURLINFO_RESPONSE_CODE, &status);
    if (status >= 200 && status < 300) {
      if (std::fwrite(data, 1, n, sink->file) != n) {
        sink->write_failed = true;
        return 0;
      }
      return n;
    }
  }
  sink->memory->append(data, n);
  return n;
}

size_t write_header(char* data, size_t size, size_t count, void* out) {
  auto* headers = static_cast<std::map<std::string, std::string>*>(out);
  const std::string line(data, size * count);
  const auto colon = line.find(':');
  if (colon != std::string::npos) {
    std::string name = line.substr(0, colon);
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    std::string value = line.substr(colon + 1);
    const auto b = value.find_first_not_of(" \t");
    const auto e = value.find_last_not_of(" \t\r\n");
    (*headers)[name] = b == std::string::npos ? "" : value.substr(b, e - b + 1);
  }
  return size * count;
}

struct FileRange {
  std::FILE* file = nullptr;
  int64_t left = 0;
};

size_t read_range(char* buffer, size_t size, size_t count, void* in) {
  auto* range = static_cast<FileRange*>(in);
  const size_t want = std::min<int64_t>(static_cast<int64_t>(size * count), range->left);
  if (want == 0) return 0;
  const size_t got = std::fread(buffer, 1, want, range->file);
  if (got == 0) return CURL_READFUNC_ABORT;
  range->left -= static_cast<int64_t>(got);
  return got;
}

using FilePtr = std::unique_ptr<std::FILE, int (*)(std::FILE*)>;

}  // namespace

bool CurlResponse::transient() const {
  if (status == 0 || status >= 500 || status == 429) return true;
  for (const char* code : {"<Code>SlowDown</Code>", "<Code>RequestTimeout</Code>", "<Code>InternalError</Code>"})
    if (body.find(code) != std::string::npos) return true;
  return false;
}

CurlResponse perform(const CurlRequest& request) {
  global_init();
  std::unique_ptr<CURL, void (*)(CURL*)> curl(curl_easy_init(), curl_easy_cleanup);
  if (!curl) throw std::runtime_error("HTTP: curl_easy_init failed");
  CurlResponse r;
  Sink sink;
  sink.memory = &r.body;
  sink.curl = curl.get();
  FilePtr out(nullptr, std::fclose);
  if (!request.download_file.empty()) {
    out.reset(std::fopen(request.download_file.c_str(), "wb"));
    if (!out) throw std::runtime_error("cannot write '" + request.download_file + "'");
    sink.file = out.get();
  }
  FilePtr in(nullptr, std::fclose);
  FileRange range;
  CURL* c = curl.get();
  curl_easy_setopt(c, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(request.timeout_s * 1000));
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(request.connect_timeout_s * 1000));
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, write_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &sink);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, write_header);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &r.headers);
  if (request.method == "HEAD") {
    curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  } else if (!request.upload_file.empty()) {
    in.reset(std::fopen(request.upload_file.c_str(), "rb"));
    if (!in) throw std::runtime_error("cannot read '" + request.upload_file + "' to upload it");
    int64_t size = request.upload_size;
    if (size < 0) {
      std::fseek(in.get(), 0, SEEK_END);
      size = static_cast<int64_t>(std::ftell(in.get())) - request.upload_offset;
    }
    std::fseek(in.get(), static_cast<long>(request.upload_offset), SEEK_SET);
    range.file = in.get();
    range.left = size;
    curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(c, CURLOPT_READFUNCTION, read_range);
    curl_easy_setopt(c, CURLOPT_READDATA, &range);
    curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(size));
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, request.method.c_str());
  } else {
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, request.method.c_str());
    if (!request.body.empty() || request.method == "POST" || request.method == "PUT") {
      curl_easy_setopt(c, CURLOPT_POSTFIELDS, request.body.data());
      curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
    }
  }
  if (!request.aws_sigv4.empty()) {
    curl_easy_setopt(c, CURLOPT_AWS_SIGV4, request.aws_sigv4.c_str());
    curl_easy_setopt(c, CURLOPT_USERPWD, request.user_pwd.c_str());
  } else if (request.basic_auth) {
    curl_easy_setopt(c, CURLOPT_HTTPAUTH, static_cast<long>(CURLAUTH_BASIC));
    curl_easy_setopt(c, CURLOPT_USERPWD, request.user_pwd.c_str());
  }
  curl_slist* headers = nullptr;
  for (const auto& h : request.headers) headers = curl_slist_append(headers, h.c_str());
  // No "Expect:" override: libcurl 7.88 would sign the empty header and S3 would refuse the signature. A server that
  // never answers 100-continue costs at most this wait.
  curl_easy_setopt(c, CURLOPT_EXPECT_100_TIMEOUT_MS, 300L);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  const CURLcode code = curl_easy_perform(c);
  curl_slist_free_all(headers);
  if (sink.write_failed) throw std::runtime_error("cannot write '" + request.download_file + "' (disk full?)");
  if (code != CURLE_OK) {
    r.error = curl_easy_strerror(code);
    r.status = 0;
    return r;
  }
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
  if (out && std::fflush(out.get()) != 0) throw std::runtime_error("cannot write '" + request.download_file + "'");
  return r;
}

CurlResponse perform_with_retries(CurlRequest request, double timeout_s, double connect_timeout_s, int64_t attempts,
                                  const std::string& what) {
  request.timeout_s = timeout_s;
  request.connect_timeout_s = connect_timeout_s;
  CurlResponse r;
  for (int attempt = 0; attempt < attempts; ++attempt) {
    backoff(attempt);
    r = perform(request);
    if (!r.transient()) return r;
    if (attempt + 1 < attempts) {  // a stalled or failing store says so at every retry, not only at the end
      std::cerr << "composer: " << what << ": " << request.method << " " << request.url << " "
                << (r.status == 0 ? "got no answer (" + r.error + ")" : "answered HTTP " + std::to_string(r.status))
                << " on attempt " << attempt + 1 << " of " << attempts << "; retrying (timeout " << timeout_s
                << " s per attempt)\n";
    }
  }
  return r;
}

std::string range_header(int64_t offset, int64_t length) {
  return "Range: bytes=" + std::to_string(offset) + "-" + std::to_string(offset + length - 1);
}

std::string ranged_body(const CurlResponse& r, int64_t offset, int64_t length, const std::string& uri) {
  const auto size = static_cast<int64_t>(r.body.size());
  if (r.status == 206 && size == length) return r.body;
  if (r.status == 200 && offset >= 0 && offset + length <= size) return r.body.substr(offset, length);
  throw ObjectStoreError("reading bytes [" + std::to_string(offset) + ", " + std::to_string(offset + length) + ") of " +
                         uri + " failed: " +
                         (r.status == 416   ? std::string("they lie past the object's end")
                          : r.status == 206 ? "the object ends first (" + std::to_string(size) + " of them exist)"
                                            : "the server answered " + std::to_string(size) + " bytes (HTTP " +
                                                  std::to_string(r.status) + ")"));
}

std::string uri_escape(const std::string& text, bool keep_slash) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/')) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

void backoff(int attempt) {
  if (attempt <= 0) return;
  const int ms = std::min(8000, 500 << std::min(attempt - 1, 5));
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

}  // namespace composer::detail
