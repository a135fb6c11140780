// Whole-State files in Composer's layout, written crash-safely. Python reads them with torch.load as a plain
// dict: {"state": {"model": {...}, "optimizers": {...}, "timestamp": {...}, ...}, "rng": [{"torch": uint8 tensor}]}.
#pragma once

#include <string>
#include <vector>

namespace composer {

struct State;

/// Writes `state` to `path`: to a temporary file in the same folder, flushed and fsynced, then renamed over
/// `path` (the folder is fsynced too). A crash or a full disk leaves any previous file at `path` intact.
/// Throws std::runtime_error naming the file when a step fails (the temporary file is removed).
void save_state_file(const State& state, const std::string& path);

/// Loads a file written by save_state_file into `state` (model first; see State::load_state_dict) and restores the
/// torch CPU generator. Throws std::runtime_error naming the file when it is missing, truncated or not a state file.
void load_state_file(State& state, const std::string& path, bool strict_model = true);

/// Writes `bytes` to `path` atomically (temporary file, fsync, rename, fsync of the folder).
void write_file_atomically(const std::string& path, const std::vector<char>& bytes);

}  // namespace composer
