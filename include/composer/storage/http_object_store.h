// HttpObjectStore: files served over HTTP(S), read-only (downloads, sizes; no listing, uploads or deletes).
#pragma once

#include "composer/storage/object_store.h"

#include <string>

namespace composer {

class HttpObjectStore : public ObjectStore {
 public:
  /// `base_url` such as "https://host:8443"; object names are paths below it.
  explicit HttpObjectStore(std::string base_url, ObjectStoreOptions options = ObjectStoreOptions());
  std::string get_uri(const std::string& object_name) const override;
  /// Throws ObjectStoreError: HTTP stores are read-only.
  void upload_object(const std::string& object_name, const std::string& filename) override;
  void download_object(const std::string& object_name, const std::string& filename, bool overwrite = false) override;
  int64_t get_object_size(const std::string& object_name) override;
  std::string read_range(const std::string& object_name, int64_t offset, int64_t length) override;
  bool reads_ranges() const override { return true; }
  /// Throws ObjectStoreError: HTTP has no listing.
  std::vector<ObjectInfo> list_objects(const std::string& prefix = "") override;
  /// Throws ObjectStoreError: HTTP stores are read-only.
  void delete_object(const std::string& object_name) override;
  bool writable() const override { return false; }

 private:
  std::string base_url_;
  ObjectStoreOptions options_;
};

}  // namespace composer
