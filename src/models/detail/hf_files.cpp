#include "models/detail/hf_files.h"

#include "utils/detail/text_file.h"

#include <ATen/ATen.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

namespace composer::models::detail {

namespace fs = std::filesystem;
using nlohmann::json;

json read_json(const std::string& path, const std::string& what) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(what + " '" + path + "' cannot be opened (missing?)");
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    throw std::runtime_error(what + " '" + path + "' is not valid JSON: " + e.what());
  }
}

std::vector<std::string> shard_files(const std::string& dir) {
  const fs::path single = fs::path(dir) / "model.safetensors";
  const fs::path index = fs::path(dir) / "model.safetensors.index.json";
  if (fs::exists(single)) return {single.string()};
  if (!fs::exists(index)) {
    throw std::runtime_error("model directory '" + dir +
                             "' has neither model.safetensors nor model.safetensors.index.json");
  }
  const json j = read_json(index.string(), "safetensors index");
  if (!j.contains("weight_map") || !j["weight_map"].is_object())
    throw std::runtime_error("safetensors index '" + index.string() + "' has no weight_map object");
  std::set<std::string> files;
  for (const auto& item : j["weight_map"].items()) files.insert(item.value().get<std::string>());
  std::vector<std::string> out;
  for (const auto& f : files) out.push_back((fs::path(dir) / f).string());
  return out;
}

std::string torch_dtype_name(at::ScalarType dtype) {
  return dtype == at::kBFloat16 ? "bfloat16" : dtype == at::kHalf ? "float16" : "float32";
}

void check_save_options(const SavePretrainedOptions& options) {
  if (!at::isFloatingType(options.dtype()))
    throw std::invalid_argument("SavePretrainedOptions.dtype must be a floating type");
  if (options.max_shard_bytes() <= 0) throw std::invalid_argument("SavePretrainedOptions.max_shard_bytes must be > 0");
}

void write_pretrained_weights(const std::string& dir, const NamedTensors& tensors, int64_t max_shard_bytes) {
  fs::create_directories(dir);
  std::vector<NamedTensors> shards(1);
  int64_t shard_bytes = 0, total = 0;
  for (const auto& [name, t] : tensors) {
    const int64_t bytes = static_cast<int64_t>(t.nbytes());
    if (shard_bytes > 0 && shard_bytes + bytes > max_shard_bytes) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().emplace_back(name, t);
    shard_bytes += bytes;
    total += bytes;
  }
  const std::map<std::string, std::string> metadata{{"format", "pt"}};
  fs::remove(fs::path(dir) / "model.safetensors");
  fs::remove(fs::path(dir) / "model.safetensors.index.json");
  if (shards.size() == 1) {
    write_safetensors((fs::path(dir) / "model.safetensors").string(), shards[0], metadata);
    return;
  }
  json index = {{"metadata", {{"total_size", total}}}, {"weight_map", json::object()}};
  for (size_t i = 0; i < shards.size(); ++i) {
    char name[64];
    std::snprintf(name, sizeof(name), "model-%05zu-of-%05zu.safetensors", i + 1, shards.size());
    write_safetensors((fs::path(dir) / name).string(), shards[i], metadata);
    for (const auto& [tensor_name, t] : shards[i]) index["weight_map"][tensor_name] = name;
  }
  composer::detail::write_json_atomically((fs::path(dir) / "model.safetensors.index.json").string(), index);
}

}  // namespace composer::models::detail
