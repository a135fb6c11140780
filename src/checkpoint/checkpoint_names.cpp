// Finding a run's checkpoints by their file name pattern (autoresume, the saver's start-up checks, retention).
#include "composer/checkpoint/checkpoint_saver.h"

#include "composer/checkpoint/distributed_checkpoint.h"
#include "composer/core/format_name.h"
#include "composer/core/state.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <regex>

namespace composer {
namespace fs = std::filesystem;

std::vector<std::pair<int64_t, std::string>> match_checkpoint_names(const std::vector<std::string>& names,
                                                                    const std::string& filename_pattern,
                                                                    const State& state) {
  std::vector<std::pair<int64_t, std::string>> found;
  const bool has_batch = filename_pattern.find("{batch}") != std::string::npos;
  if (!has_batch && filename_pattern.find("{epoch}") == std::string::npos) return found;
  const std::string key = has_batch ? "{batch}" : "{epoch}";
  // Escape regex characters; the key becomes a capture, other timed variables digits, fixed ones their values.
  std::string pattern = std::regex_replace(filename_pattern, std::regex(R"([.^$|()\[\]*+?\\])"), R"(\$&)");
  pattern.replace(pattern.find(key), key.size(), "@KEY@");
  for (const char* v : {"{epoch}", "{batch}", "{batch_in_epoch}", "{sample}", "{sample_in_epoch}", "{token}",
                        "{token_in_epoch}", "{total_wct}", "{epoch_wct}", "{batch_wct}"}) {
    for (auto pos = pattern.find(v); pos != std::string::npos; pos = pattern.find(v))
      pattern.replace(pos, std::strlen(v), "@D@");
  }
  pattern = format_name_with_dist(pattern, state.run_name);
  for (auto pos = pattern.find("@D@"); pos != std::string::npos; pos = pattern.find("@D@"))
    pattern.replace(pos, 3, R"(\d+)");
  pattern.replace(pattern.find("@KEY@"), 5, R"((\d+))");
  const std::regex re(pattern);
  for (const auto& name : names) {
    std::smatch m;
    if (std::regex_match(name, m, re)) found.emplace_back(std::stoll(m[1].str()), name);
  }
  std::stable_sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  return found;
}

std::vector<std::pair<int64_t, std::string>> find_checkpoints(const std::string& folder,
                                                              const std::string& filename_pattern, const State& state) {
  std::vector<std::string> names;
  std::error_code ec;
  if (fs::is_directory(folder, ec)) {
    for (const auto& entry : fs::directory_iterator(folder)) {
      if (entry.is_symlink()) continue;
      // Files, and sharded checkpoints' directories once complete (a save that did not finish has no .metadata).
      if (entry.is_regular_file() || is_distributed_checkpoint(entry.path().string()))
        names.push_back(entry.path().filename().string());
    }
  }
  auto found = match_checkpoint_names(names, filename_pattern, state);
  for (auto& f : found) f.second = (fs::path(folder) / f.second).string();
  return found;
}

}  // namespace composer
