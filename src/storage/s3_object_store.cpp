#include "composer/storage/s3_object_store.h"

#include "storage/detail/aws_config.h"
#include "storage/detail/curl_transfer.h"
#include "storage/detail/local_files.h"
#include "storage/detail/xml_text.h"

#include <atomic>
#include <exception>
#include <filesystem>
#include <mutex>
#include <stdexcept>
#include <thread>

namespace composer {

namespace fs = std::filesystem;
using detail::CurlRequest;
using detail::CurlResponse;

namespace {

/// "InvalidAccessKeyId: The AWS Access Key Id you provided does not exist" from an S3 error body, or "HTTP 403".
std::string s3_reason(const CurlResponse& r) {
  const std::string code = detail::xml_value(r.body, "Code");
  if (code.empty()) return "HTTP " + std::to_string(r.status);
  const std::string message = detail::xml_value(r.body, "Message");
  return code + (message.empty() ? "" : ": " + message);
}

bool ok(const CurlResponse& r) { return r.status >= 200 && r.status < 300; }

}  // namespace

S3ObjectStore::S3ObjectStore(std::string bucket, std::string prefix, ObjectStoreOptions options)
    : bucket_(std::move(bucket)), prefix_(std::move(prefix)), options_(std::move(options)) {
  options_.validate();
  while (!bucket_.empty() && bucket_.back() == '/') bucket_.pop_back();
  while (!prefix_.empty() && prefix_.front() == '/') prefix_.erase(0, 1);
  if (!prefix_.empty() && prefix_.back() != '/') prefix_ += '/';
  if (bucket_.empty() || bucket_.find('/') != std::string::npos)
    throw std::invalid_argument("S3ObjectStore: bucket '" + bucket_ +
                                "' is not a bucket name (expected s3://bucket/...)");
  const auto settings = detail::resolve_aws_settings(options_.endpoint_url(), options_.region(), options_.profile());
  region_ = settings.region;
  credentials_ = {settings.access_key, settings.secret_key, settings.session_token};
  if (!settings.endpoint_url.empty()) {
    endpoint_ = settings.endpoint_url;
    path_style_ = true;
  } else {
    path_style_ = bucket_.find('.') != std::string::npos;
    endpoint_ = path_style_ ? "https://s3." + region_ + ".amazonaws.com"
                            : "https://" + bucket_ + ".s3." + region_ + ".amazonaws.com";
  }
}

std::string S3ObjectStore::get_uri(const std::string& object_name) const {
  return "s3://" + bucket_ + "/" + key(object_name);
}

std::string S3ObjectStore::url(const std::string& k, const std::string& query) const {
  std::string u = endpoint_ + (path_style_ ? "/" + bucket_ : "");
  if (!k.empty() || !path_style_) u += "/" + detail::uri_escape(k, true);
  if (!query.empty()) u += "?" + query;
  return u;
}

CurlResponse S3ObjectStore::send(CurlRequest request) const {
  if (!credentials_.access_key.empty()) {
    request.aws_sigv4 = "aws:amz:" + region_ + ":s3";
    request.user_pwd = credentials_.access_key + ":" + credentials_.secret_key;
    if (!credentials_.session_token.empty())
      request.headers.push_back("x-amz-security-token: " + credentials_.session_token);
  }
  // libcurl 7.88 signs the payload hash only when it is given; S3 accepts an unsigned payload with signed headers.
  request.headers.push_back("x-amz-content-sha256: UNSIGNED-PAYLOAD");
  return detail::perform_with_retries(std::move(request), options_.timeout(), options_.connect_timeout(),
                                      options_.num_attempts());
}

void S3ObjectStore::fail(const std::string& what, const std::string& uri, const CurlResponse& r) const {
  const std::string& endpoint = endpoint_;
  const std::string& bucket = bucket_;
  const int64_t attempts = options_.num_attempts();
  if (r.status == 0)
    throw ObjectStoreTransientError(what + " " + uri + " failed: " + r.error + " (endpoint " + endpoint + ", " +
                                    std::to_string(attempts) + " attempts)");
  const std::string code = detail::xml_value(r.body, "Code");
  if (code == "NoSuchBucket" || (r.status == 404 && code.empty() && uri == "s3://" + bucket + "/"))
    throw ObjectNotFoundError(what + " " + uri + " failed: the bucket '" + bucket + "' does not exist at " + endpoint);
  if (r.status == 404) throw ObjectNotFoundError(what + " " + uri + " failed: no such object");
  if (r.status == 401 || r.status == 403)
    throw ObjectStoreError(what + " " + uri + " failed: access refused (" + s3_reason(r) +
                           "); check the credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY or the AWS profile)");
  if (r.transient())
    throw ObjectStoreTransientError(what + " " + uri + " failed: " + s3_reason(r) + " (endpoint " + endpoint + ", " +
                                    std::to_string(attempts) + " attempts)");
  throw ObjectStoreError(what + " " + uri + " failed: " + s3_reason(r));
}

int64_t S3ObjectStore::get_object_size(const std::string& object_name) {
  CurlRequest req;
  req.method = "HEAD";
  req.url = url(key(object_name));
  const CurlResponse r = send(req);
  if (!ok(r)) {
    if (r.status == 404) {
      // HEAD answers carry no body: ask the bucket whether it exists, to say which one is missing.
      CurlRequest b;
      b.method = "HEAD";
      b.url = url("");
      if (send(b).status == 404)
        fail("looking up", get_uri(object_name), CurlResponse{404, "", "<Code>NoSuchBucket</Code>", {}});
    }
    fail("looking up", get_uri(object_name), r);
  }
  const auto it = r.headers.find("content-length");
  return it == r.headers.end() ? 0 : std::stoll(it->second);
}

void S3ObjectStore::upload_object(const std::string& object_name, const std::string& filename) {
  std::error_code ec;
  const auto size = static_cast<int64_t>(fs::file_size(filename, ec));
  if (ec)
    throw ObjectStoreError("uploading '" + filename + "' to " + get_uri(object_name) + " failed: " + ec.message());
  if (size >= options_.multipart_threshold()) return upload_multipart(key(object_name), filename, size);
  CurlRequest req;
  req.method = "PUT";
  req.url = url(key(object_name));
  req.upload_file = filename;
  req.headers.push_back("Content-Type: application/octet-stream");
  const CurlResponse r = send(req);
  if (!ok(r)) fail("uploading '" + filename + "' to", get_uri(object_name), r);
}

void S3ObjectStore::upload_multipart(const std::string& k, const std::string& filename, int64_t size) {
  const std::string uri = "s3://" + bucket_ + "/" + k;
  const std::string what = "uploading '" + filename + "' to";
  CurlRequest start;
  start.method = "POST";
  start.url = url(k, "uploads=");
  const CurlResponse started = send(start);
  const std::string upload_id = detail::xml_value(started.body, "UploadId");
  if (!ok(started) || upload_id.empty()) fail(what, uri, started);
  const std::string id_query = "uploadId=" + detail::uri_escape(upload_id, false);
  try {
    // Parts go up on up to max_concurrency threads (each request its own connection); the first failure stops the
    // others from starting new parts.
    const int64_t part_size = options_.part_size();
    const int64_t count = (size + part_size - 1) / part_size;
    std::vector<std::string> etags(static_cast<size_t>(count));
    std::atomic<int64_t> next{0};
    std::mutex error_mutex;
    std::exception_ptr error;
    auto worker = [&] {
      for (int64_t i = next++; i < count; i = next++) {
        {
          std::lock_guard<std::mutex> lock(error_mutex);
          if (error) return;
        }
        try {
          CurlRequest part;
          part.method = "PUT";
          part.url = url(k, "partNumber=" + std::to_string(i + 1) + "&" + id_query);
          part.upload_file = filename;
          part.upload_offset = i * part_size;
          part.upload_size = std::min(part_size, size - i * part_size);
          const CurlResponse r = send(part);
          const auto etag = r.headers.find("etag");
          if (!ok(r) || etag == r.headers.end()) fail(what + " (part " + std::to_string(i + 1) + ")", uri, r);
          etags[static_cast<size_t>(i)] = etag->second;
        } catch (...) {
          std::lock_guard<std::mutex> lock(error_mutex);
          if (!error) error = std::current_exception();
        }
      }
    };
    std::vector<std::thread> threads;
    for (int64_t t = 1; t < std::min<int64_t>(options_.max_concurrency(), count); ++t) threads.emplace_back(worker);
    worker();
    for (auto& t : threads) t.join();
    if (error) std::rethrow_exception(error);
    std::string parts;
    for (int64_t i = 0; i < count; ++i)
      parts += "<Part><PartNumber>" + std::to_string(i + 1) + "</PartNumber><ETag>" +
               detail::xml_escape(etags[static_cast<size_t>(i)]) + "</ETag></Part>";
    CurlRequest complete;
    complete.method = "POST";
    complete.url = url(k, id_query);
    complete.body = "<CompleteMultipartUpload>" + parts + "</CompleteMultipartUpload>";
    complete.headers.push_back("Content-Type: application/xml");
    const CurlResponse r = send(complete);
    // S3 may answer 200 with an <Error> body when completing fails.
    if (!ok(r) || r.body.find("<Error>") != std::string::npos) fail(what, uri, r);
  } catch (...) {
    CurlRequest abort;
    abort.method = "DELETE";
    abort.url = url(k, id_query);
    try {
      send(abort);
    } catch (...) {
    }
    throw;
  }
}

void S3ObjectStore::download_object(const std::string& object_name, const std::string& filename, bool overwrite) {
  const std::string uri = get_uri(object_name);
  detail::download_through_temporary(filename, overwrite, uri, [&](const std::string& tmp) {
    CurlRequest req;
    req.url = url(key(object_name));
    req.download_file = tmp;
    const CurlResponse r = send(req);
    if (!ok(r)) fail("downloading", uri, r);
    const auto length = r.headers.find("content-length");
    if (length != r.headers.end() && static_cast<int64_t>(fs::file_size(tmp)) != std::stoll(length->second))
      throw ObjectStoreTransientError("downloading " + uri + " failed: the connection ended after " +
                                      std::to_string(fs::file_size(tmp)) + " of " + length->second + " bytes");
  });
}

std::string S3ObjectStore::read_range(const std::string& object_name, int64_t offset, int64_t length) {
  if (length <= 0) return "";
  CurlRequest req;
  req.url = url(key(object_name));
  req.headers.push_back(detail::range_header(offset, length));
  const CurlResponse r = send(req);
  if (!ok(r) && r.status != 416) fail("reading", get_uri(object_name), r);
  return detail::ranged_body(r, offset, length, get_uri(object_name));
}

std::vector<ObjectInfo> S3ObjectStore::list_objects(const std::string& prefix) {
  std::vector<ObjectInfo> out;
  std::string token;
  while (true) {
    // The query's parameters in the order SigV4's canonical form sorts them (libcurl 7.88 signs them as given).
    std::string query;
    if (!token.empty()) query += "continuation-token=" + detail::uri_escape(token, false) + "&";
    query += "list-type=2&prefix=" + detail::uri_escape(key(prefix), false);
    CurlRequest req;
    req.url = url("", query);
    const CurlResponse r = send(req);
    if (!ok(r)) fail("listing", get_uri(prefix) + "*", r);
    const auto keys = detail::xml_values(r.body, "Key");
    const auto sizes = detail::xml_values(r.body, "Size");
    for (size_t i = 0; i < keys.size(); ++i) {
      if (keys[i].compare(0, prefix_.size(), prefix_) != 0) continue;
      out.push_back({keys[i].substr(prefix_.size()), i < sizes.size() ? std::stoll(sizes[i]) : 0});
    }
    if (detail::xml_value(r.body, "IsTruncated") != "true") break;
    token = detail::xml_value(r.body, "NextContinuationToken");
    if (token.empty()) break;
  }
  return out;
}

void S3ObjectStore::delete_object(const std::string& object_name) {
  CurlRequest req;
  req.method = "DELETE";
  req.url = url(key(object_name));
  const CurlResponse r = send(req);
  if (!ok(r) && r.status != 404) fail("deleting", get_uri(object_name), r);
}

}  // namespace composer
