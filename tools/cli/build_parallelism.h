// The config's parallelism_config section (Composer's Trainer argument): {fsdp: {...}} for sharded training.
#pragma once

#include "cli/config_node.h"

#include "composer/dist/fully_sharded.h"

namespace composer::cli {

/// parallelism_config: {fsdp: {sharding_strategy, sync_module_states, auto_wrap, state_dict_type,
/// sharded_ckpt_prefix_dir}}. Composer's other FSDP keys are
/// accepted at Composer's default value (what the engine does) and are a ConfigError naming the key otherwise, as
/// are `tp` and unknown keys.
dist::ParallelismConfig build_parallelism(const ConfigNode& n);

}  // namespace composer::cli
