#include "cli/build_parallelism.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>

namespace composer::cli {
namespace {

// Composer's FSDPConfig keys this engine does not vary, with the default it matches (lower case).
const std::map<std::string, std::string> kComposerDefaults{
    {"backward_prefetch_limit", "1"},      {"cpu_offload", "false"},    {"forward_prefetch_limit", "1"},
    {"keep_low_precision_grads", "false"}, {"use_orig_params", "true"}, {"verbose", "false"},
};

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// Composer's mixed_precision: DEFAULT, PURE, FULL, or {param_dtype, reduce_dtype, buffer_dtype}.
dist::FSDPMixedPrecision mixed_precision(const ConfigNode& f) {
  const std::string key = f.key_path("mixed_precision");
  if (f.yaml()["mixed_precision"].IsMap()) {
    const ConfigNode m = f.child("mixed_precision");
    m.expect_keys({"param_dtype", "reduce_dtype", "buffer_dtype"});
    dist::MixedPrecisionDtypes dtypes;
    const auto read = [&m](const std::string& name, std::optional<at::ScalarType>& out) {
      if (!m.has(name) || m.yaml()[name].IsNull()) return;
      try {
        out = dist::mixed_precision_dtype_from_string(m.require_string(name), m.key_path(name));
      } catch (const std::invalid_argument& e) {
        throw ConfigError(e.what());
      }
    };
    read("param_dtype", dtypes.param_dtype);
    read("reduce_dtype", dtypes.reduce_dtype);
    read("buffer_dtype", dtypes.buffer_dtype);
    return dist::FSDPMixedPrecision::custom(dtypes);
  }
  const dist::FSDPMixedPrecision preset = dist::FSDPMixedPrecision::of(f.require_string("mixed_precision"));
  try {
    (void)dist::resolve_mixed_precision(preset, at::kFloat, key);
  } catch (const std::invalid_argument& e) {
    throw ConfigError(e.what());
  }
  return preset;
}

}  // namespace

dist::ParallelismConfig build_parallelism(const ConfigNode& n) {
  n.expect_keys({"fsdp", "tp"});
  if (n.has("tp")) throw ConfigError(n.key_path("tp") + ": tensor parallelism is not supported by Composer C++");
  dist::ParallelismConfig config;
  if (!n.has("fsdp")) return config;
  const ConfigNode f = n.child("fsdp");
  std::vector<std::string> allowed{"sharding_strategy",
                                   "sync_module_states",
                                   "auto_wrap",
                                   "state_dict_type",
                                   "sharded_ckpt_prefix_dir",
                                   "activation_checkpointing",
                                   "activation_checkpointing_reentrant",
                                   "load_monolith_rank0_only",
                                   "backward_prefetch",
                                   "forward_prefetch",
                                   "limit_all_gathers",
                                   "mixed_precision",
                                   "data_parallel_shard_degree",
                                   "data_parallel_replicate_degree",
                                   "activation_cpu_offload"};
  for (const auto& [key, value] : kComposerDefaults) allowed.push_back(key);
  f.expect_keys(allowed);
  dist::FSDPOptions o;
  if (f.has("sharding_strategy")) {
    try {
      o.sharding_strategy(
          dist::sharding_strategy_from_string(f.require_string("sharding_strategy"), f.key_path("sharding_strategy")));
    } catch (const std::invalid_argument& e) {
      throw ConfigError(e.what());  // names the key already
    }
  }
  o.data_parallel_shard_degree(f.get_int("data_parallel_shard_degree", o.data_parallel_shard_degree()));
  if (f.has("data_parallel_replicate_degree") && !f.yaml()["data_parallel_replicate_degree"].IsNull())
    o.data_parallel_replicate_degree(f.get_int("data_parallel_replicate_degree", -1));
  try {  // early, with the keys' paths: the mesh itself is sized when training starts
    dist::DataParallelMesh::check_degree(o.data_parallel_shard_degree(), f.key_path("data_parallel_shard_degree"));
    if (const auto replicate = o.data_parallel_replicate_degree())
      dist::DataParallelMesh::check_degree(*replicate, f.key_path("data_parallel_replicate_degree"));
  } catch (const std::invalid_argument& e) {
    throw ConfigError(e.what());
  }
  o.sync_module_states(f.get_bool("sync_module_states", o.sync_module_states()));
  o.auto_wrap(f.get_bool("auto_wrap", o.auto_wrap()));
  o.activation_checkpointing(f.get_bool("activation_checkpointing", o.activation_checkpointing()));
  o.activation_cpu_offload(f.get_bool("activation_cpu_offload", o.activation_cpu_offload()));
  o.load_monolith_rank0_only(f.get_bool("load_monolith_rank0_only", o.load_monolith_rank0_only()));
  o.forward_prefetch(f.get_bool("forward_prefetch", o.forward_prefetch()));
  o.limit_all_gathers(f.get_bool("limit_all_gathers", o.limit_all_gathers()));
  if (f.has("backward_prefetch")) {
    try {
      o.backward_prefetch(
          dist::backward_prefetch_from_string(f.require_string("backward_prefetch"), f.key_path("backward_prefetch")));
    } catch (const std::invalid_argument& e) {
      throw ConfigError(e.what());
    }
  }
  if (f.has("mixed_precision")) o.mixed_precision(mixed_precision(f));
  o.activation_checkpointing_reentrant(
      f.get_bool("activation_checkpointing_reentrant", o.activation_checkpointing_reentrant()));
  if (f.has("state_dict_type")) {
    const std::string type = lower(f.require_string("state_dict_type"));
    try {
      dist::check_state_dict_type(type, f.key_path("state_dict_type"));
    } catch (const std::invalid_argument& e) {
      throw ConfigError(e.what());
    }
    o.state_dict_type(type);
  }
  if (f.has("sharded_ckpt_prefix_dir")) o.sharded_ckpt_prefix_dir(f.require_string("sharded_ckpt_prefix_dir"));
  for (const auto& [key, fixed] : kComposerDefaults) {
    if (!f.has(key) || lower(f.require_string(key)) == fixed) continue;
    throw ConfigError(f.key_path(key) + ": only Composer's default (" + fixed +
                      ") is supported by Composer C++ so far, got '" + f.require_string(key) + "'");
  }
  config.fsdp(o);
  return config;
}

}  // namespace composer::cli
