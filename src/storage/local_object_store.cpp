#include "composer/storage/local_object_store.h"

#include "storage/detail/local_files.h"

#include <algorithm>
#include <filesystem>
#include <stdexcept>

namespace composer {

namespace fs = std::filesystem;

LocalObjectStore::LocalObjectStore(std::string root) : root_(std::move(root)) {
  if (root_.empty()) throw std::invalid_argument("LocalObjectStore: root is empty (expected a folder)");
  while (root_.size() > 1 && root_.back() == '/') root_.pop_back();
}

std::string LocalObjectStore::path(const std::string& object_name) const {
  for (const auto& part : fs::path(object_name))
    if (part == "..") throw ObjectStoreError("object name '" + object_name + "' leaves the store (it contains '..')");
  return (fs::path(root_) / object_name).string();
}

std::string LocalObjectStore::get_uri(const std::string& object_name) const { return "file://" + path(object_name); }

void LocalObjectStore::upload_object(const std::string& object_name, const std::string& filename) {
  try {
    detail::copy_file_atomically(filename, path(object_name));
  } catch (const std::exception& e) {
    throw ObjectStoreError("uploading '" + filename + "' to " + get_uri(object_name) + " failed: " + e.what());
  }
}

void LocalObjectStore::download_object(const std::string& object_name, const std::string& filename, bool overwrite) {
  const std::string from = path(object_name);
  if (!fs::is_regular_file(from))
    throw ObjectNotFoundError("downloading " + get_uri(object_name) + " failed: no such object");
  detail::download_through_temporary(filename, overwrite, get_uri(object_name), [&](const std::string& tmp) {
    std::error_code ec;
    fs::copy_file(from, tmp, fs::copy_options::overwrite_existing, ec);
    if (ec) throw ObjectStoreError("downloading " + get_uri(object_name) + " failed: " + ec.message());
  });
}

int64_t LocalObjectStore::get_object_size(const std::string& object_name) {
  std::error_code ec;
  const auto size = fs::file_size(path(object_name), ec);
  if (ec) throw ObjectNotFoundError("looking up " + get_uri(object_name) + " failed: no such object");
  return static_cast<int64_t>(size);
}

std::string LocalObjectStore::read_range(const std::string& object_name, int64_t offset, int64_t length) {
  if (!fs::is_regular_file(path(object_name)))
    throw ObjectNotFoundError("reading " + get_uri(object_name) + " failed: no such object");
  return detail::read_file_range(path(object_name), offset, length, get_uri(object_name));
}

std::vector<ObjectInfo> LocalObjectStore::list_objects(const std::string& prefix) {
  std::vector<ObjectInfo> out;
  // Walk the deepest folder the prefix names completely, then filter by the whole prefix.
  const auto slash = prefix.rfind('/');
  const fs::path base = fs::path(root_) / (slash == std::string::npos ? "" : prefix.substr(0, slash));
  std::error_code ec;
  if (!fs::is_directory(base, ec)) return out;
  for (auto it = fs::recursive_directory_iterator(base, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (!it->is_regular_file()) continue;
    const std::string name = fs::relative(it->path(), root_).string();
    const std::string file = it->path().filename().string();
    const bool temporary = (file[0] == '.' && file.find(".tmp-") != std::string::npos) ||
                           (file.size() > 4 && file.compare(file.size() - 4, 4, ".tmp") == 0);
    if (name.compare(0, prefix.size(), prefix) == 0 && !temporary)
      out.push_back({name, static_cast<int64_t>(it->file_size())});
  }
  std::sort(out.begin(), out.end(), [](const ObjectInfo& a, const ObjectInfo& b) { return a.name < b.name; });
  return out;
}

void LocalObjectStore::delete_object(const std::string& object_name) {
  std::error_code ec;
  fs::remove(path(object_name), ec);
  if (ec) throw ObjectStoreError("deleting " + get_uri(object_name) + " failed: " + ec.message());
}

}  // namespace composer
