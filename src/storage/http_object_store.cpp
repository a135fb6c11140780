#include "composer/storage/http_object_store.h"

#include "storage/detail/curl_transfer.h"
#include "storage/detail/local_files.h"

#include <filesystem>

namespace composer {

namespace {

detail::CurlResponse get(detail::CurlRequest request, const ObjectStoreOptions& options) {
  return detail::perform_with_retries(std::move(request), options.timeout(), options.connect_timeout(),
                                      options.num_attempts());
}

[[noreturn]] void fail(const std::string& what, const std::string& uri, const detail::CurlResponse& r) {
  if (r.status == 404) throw ObjectNotFoundError(what + " " + uri + " failed: no such object (HTTP 404)");
  if (r.status == 0) throw ObjectStoreTransientError(what + " " + uri + " failed: " + r.error);
  if (r.transient()) throw ObjectStoreTransientError(what + " " + uri + " failed: HTTP " + std::to_string(r.status));
  throw ObjectStoreError(what + " " + uri + " failed: HTTP " + std::to_string(r.status));
}

}  // namespace

HttpObjectStore::HttpObjectStore(std::string base_url, ObjectStoreOptions options)
    : base_url_(std::move(base_url)), options_(std::move(options)) {
  options_.validate();
  while (!base_url_.empty() && base_url_.back() == '/') base_url_.pop_back();
}

std::string HttpObjectStore::get_uri(const std::string& object_name) const {
  return base_url_ + "/" + detail::uri_escape(object_name, true);
}

void HttpObjectStore::upload_object(const std::string& object_name, const std::string&) {
  throw ObjectStoreError("uploading to " + get_uri(object_name) + " failed: HTTP object stores are read-only");
}

void HttpObjectStore::download_object(const std::string& object_name, const std::string& filename, bool overwrite) {
  const std::string uri = get_uri(object_name);
  detail::download_through_temporary(filename, overwrite, uri, [&](const std::string& tmp) {
    detail::CurlRequest req;
    req.url = uri;
    req.download_file = tmp;
    const auto r = get(req, options_);
    if (r.status < 200 || r.status >= 300) fail("downloading", uri, r);
  });
}

int64_t HttpObjectStore::get_object_size(const std::string& object_name) {
  detail::CurlRequest req;
  req.method = "HEAD";
  req.url = get_uri(object_name);
  const auto r = get(req, options_);
  if (r.status < 200 || r.status >= 300) fail("looking up", req.url, r);
  const auto it = r.headers.find("content-length");
  if (it == r.headers.end())
    throw ObjectStoreError("looking up " + req.url + " failed: the server sent no Content-Length");
  return std::stoll(it->second);
}

std::string HttpObjectStore::read_range(const std::string& object_name, int64_t offset, int64_t length) {
  if (length <= 0) return "";
  detail::CurlRequest req;
  req.url = get_uri(object_name);
  req.headers.push_back(detail::range_header(offset, length));
  const auto r = get(req, options_);
  if ((r.status < 200 || r.status >= 300) && r.status != 416) fail("reading", req.url, r);
  return detail::ranged_body(r, offset, length, req.url);
}

std::vector<ObjectInfo> HttpObjectStore::list_objects(const std::string& prefix) {
  throw ObjectStoreError("listing " + get_uri(prefix) + "* failed: HTTP object stores cannot list objects");
}

void HttpObjectStore::delete_object(const std::string& object_name) {
  throw ObjectStoreError("deleting " + get_uri(object_name) + " failed: HTTP object stores are read-only");
}

}  // namespace composer
