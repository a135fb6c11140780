// LocalObjectStore: a folder on a local or mounted file system behind the ObjectStore interface (file:// URIs), for
// shared file systems and for tests.
#pragma once

#include "composer/storage/object_store.h"

#include <string>

namespace composer {

/// Objects are files under `root`; names with ".." or a leading '/' are rejected. Uploads copy through a temporary
/// file and a rename, so readers never see a partial object.
class LocalObjectStore : public ObjectStore {
 public:
  explicit LocalObjectStore(std::string root);
  std::string get_uri(const std::string& object_name) const override;
  void upload_object(const std::string& object_name, const std::string& filename) override;
  void download_object(const std::string& object_name, const std::string& filename, bool overwrite = false) override;
  int64_t get_object_size(const std::string& object_name) override;
  std::string read_range(const std::string& object_name, int64_t offset, int64_t length) override;
  bool reads_ranges() const override { return true; }
  std::vector<ObjectInfo> list_objects(const std::string& prefix = "") override;
  void delete_object(const std::string& object_name) override;

 private:
  std::string path(const std::string& object_name) const;
  std::string root_;
};

}  // namespace composer
