#include "composer/checkpoint/checkpoint.h"

#include "checkpoint/detail/file_parts.h"
#include "composer/checkpoint/distributed_checkpoint.h"
#include "composer/checkpoint/state_codec.h"
#include "composer/core/serialization.h"
#include "composer/core/state.h"
#include "composer/dist/dist.h"
#include "composer/dist/env.h"
#include "composer/utils/atomic_file.h"
#include "composer/utils/error_text.h"
#include "composer/utils/reproducibility.h"
#include "formats/detail/pickle_io.h"
#include "formats/detail/zip_verify.h"

#include <fnmatch.h>
#include <torch/cuda.h>
#include <torch/serialize.h>
#include <torch/torch.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

namespace composer {
namespace {

// This rank's generator states: {"torch": uint8 tensor, "cuda": [uint8 tensor per device]}.
Dict rank_rng_state() {
  const GeneratorStates states = GeneratorStates::capture();
  Dict rank_rng = new_dict();
  rank_rng.insert("torch", states.cpu);
  if (!states.cuda.empty()) rank_rng.insert("cuda", c10::List<at::Tensor>(states.cuda));
  return rank_rng;
}

bool matches_any(const std::string& path, const std::vector<std::string>& patterns) {
  for (const auto& p : patterns)
    if (::fnmatch(p.c_str(), path.c_str(), 0) == 0) return true;
  return false;
}

c10::IValue prune(const c10::IValue& value, const std::string& path, const std::vector<std::string>& patterns) {
  if (!value.isGenericDict()) return value;
  const auto d = value.toGenericDict();
  Dict out(d.keyType(), d.valueType());
  for (const auto& e : d) {
    const std::string key = e.key().isString() ? e.key().toStringRef()
                            : e.key().isInt()  ? std::to_string(e.key().toInt())
                                               : "?";
    const std::string child = path.empty() ? key : path + "/" + key;
    if (matches_any(child, patterns)) continue;
    out.insert(e.key(), prune(e.value(), child, patterns));
  }
  return out;
}

c10::IValue read_whole(const std::string& path) {
  detail::verify_zip_records(path);  // LibTorch's reader does not check the CRC-32s
  return detail::unpickle_file(path);
}

// Under a sharded strategy: each rank verifies its share of the records' CRC-32s (every rank reads the file, and
// read_on_every_rank agrees on any rank's error) and reads its parts of the tensors it holds in part. A file the
// lazy reader cannot read (a LibTorch-only object) is read whole instead, as without parts.
c10::IValue read_by_parts(const std::string& path, const PartsWanted& wanted, std::vector<ShardedEntry>& parts) {
  const detail::ZipArchive zip(path);
  zip.verify(dist::get_global_rank(), dist::get_world_size());
  try {
    std::vector<ShardedEntry> read;  // kept only when the whole read succeeds: a failure falls back to no parts
    c10::IValue payload = detail::read_file_parts(zip, wanted, read);
    parts.insert(parts.end(), read.begin(), read.end());
    return payload;
  } catch (const std::exception&) {
  }
  return detail::unpickle_file(path);
}

}  // namespace

c10::IValue gather_rng_states() {
  c10::impl::GenericList rng(c10::AnyType::get());
  if (dist::get_world_size() == 1) {
    rng.push_back(rank_rng_state());
    return rng;
  }
  const std::vector<char> mine = torch::pickle_save(rank_rng_state());
  for (const auto& bytes : dist::all_gather_object(std::string(mine.begin(), mine.end()))) {
    rng.push_back(torch::pickle_load(std::vector<char>(bytes.begin(), bytes.end())));
  }
  return rng;
}

c10::IValue make_checkpoint(const State& state, bool weights_only, const std::optional<c10::IValue>& rng) {
  Dict payload = new_dict();
  const Dict full = state_dict(state).toGenericDict();
  if (weights_only) {
    Dict slim = new_dict();
    slim.insert("model", full.at("model"));
    slim.insert("metadata", full.at("metadata"));
    payload.insert("state", slim);
  } else {
    payload.insert("state", full);
    payload.insert("rng", rng ? *rng : gather_rng_states());
  }
  return payload;
}

void save_checkpoint(const State& state, const std::string& path, bool weights_only,
                     const std::optional<c10::IValue>& rng) {
  const c10::IValue payload = make_checkpoint(state, weights_only, rng);
  write_file_atomically(path, [&](const ByteSink& sink) { detail::pickle_to(payload, sink); });
}

c10::IValue read_checkpoint(const std::string& path) {
  std::vector<ShardedEntry> parts;
  return read_checkpoint(path, PartsWanted(), parts);
}

c10::IValue read_checkpoint(const std::string& path, const PartsWanted& wanted, std::vector<ShardedEntry>& parts) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return read_distributed_checkpoint(path, wanted, parts);  // sharded
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) throw CheckpointError("checkpoint '" + path + "' cannot be opened: " + ec.message());
  if (size == 0) throw CheckpointError("checkpoint '" + path + "' is empty");
  c10::IValue payload;
  try {
    payload = wanted ? read_by_parts(path, wanted, parts) : read_whole(path);
  } catch (const std::exception& e) {
    throw CheckpointError("checkpoint '" + path + "' is corrupt or truncated (" + std::to_string(size) +
                          " bytes): " + brief_error(e, 200));
  }
  if (!payload.isGenericDict() || !payload.toGenericDict().contains("state") ||
      !payload.toGenericDict().at("state").isGenericDict()) {
    throw CheckpointError("checkpoint '" + path + "' is not a Composer checkpoint (no 'state' dict)");
  }
  return payload;
}

std::optional<c10::IValue> apply_checkpoint(State& state, c10::IValue payload, const CheckpointLoadOptions& options,
                                            const std::string& path, std::vector<ShardedEntry> parts) {
  if (!options.ignore_keys.empty()) payload = remove_keys(payload, options.ignore_keys);
  const Dict d = payload.toGenericDict();
  Dict saved = d.at("state").toGenericDict();
  if (options.weights_only) {
    Dict slim = new_dict();
    if (saved.contains("model")) slim.insert("model", saved.at("model"));
    saved = slim;
  }
  // The parts go as their paths in the payload would: a pattern matching the path or a dict above it drops it.
  const auto dropped = [&](const ShardedEntry& e) {
    if (options.weights_only && e.path.front() != "model") return true;
    std::string p = "state";
    for (const auto& key : e.path) {
      if (matches_any(p, options.ignore_keys)) return true;
      p += "/" + key;
    }
    return matches_any(p, options.ignore_keys);
  };
  parts.erase(std::remove_if(parts.begin(), parts.end(), dropped), parts.end());
  const std::string new_run_name = state.run_name;
  try {
    load_state_dict(state, saved, options.strict_model, parts);
  } catch (const std::exception& e) {
    throw CheckpointError("checkpoint '" + path + "' does not fit this run: " + e.what());
  }
  state.run_name = new_run_name;  // as Composer: the run keeps its own name
  if (options.weights_only || !d.contains("rng")) return std::nullopt;
  return d.at("rng");
}

void restore_rng(const c10::IValue& rng, int64_t rank) {
  const auto list = rng.toList();
  if (list.size() == 0) return;
  const Dict mine =
      list.get(static_cast<size_t>(std::min<int64_t>(rank, static_cast<int64_t>(list.size()) - 1))).toGenericDict();
  GeneratorStates states;
  states.cpu = mine.at("torch").toTensor();
  if (mine.contains("cuda"))
    for (const c10::IValue& t : mine.at("cuda").toList()) states.cuda.push_back(t.toTensor());
  states.restore();
}

c10::IValue remove_keys(c10::IValue payload, const std::vector<std::string>& patterns) {
  return prune(payload, "", patterns);
}

}  // namespace composer
