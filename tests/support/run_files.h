// What a training process leaves on disk, read back by the process tests: a pickled dict of tensors (the workers'
// final weights) and the temporary file of a checkpoint write still in progress.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/serialize.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

namespace composer::testing {

/// A new, empty folder <temp>/composer_test_<name>_<pid> (emptied first if a crashed run left it).
inline std::filesystem::path fresh_dir(const std::string& name) {
  std::filesystem::path p =
      std::filesystem::temp_directory_path() / ("composer_test_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p;
}

/// {name: tensor} from a file written with torch::pickle_save of a string -> tensor dict.
inline std::map<std::string, at::Tensor> read_pickled_tensors(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::map<std::string, at::Tensor> out;
  for (const auto& e : torch::pickle_load(bytes).toGenericDict()) out[e.key().toStringRef()] = e.value().toTensor();
  return out;
}

/// True while `dir` holds a checkpoint's temporary file (write_file_atomically's ".<name>.tmp-<pid>").
inline bool has_temp_file(const std::filesystem::path& dir) {
  if (!std::filesystem::is_directory(dir)) return false;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().filename().string().find(".tmp-") != std::string::npos) return true;
  return false;
}

}  // namespace composer::testing
