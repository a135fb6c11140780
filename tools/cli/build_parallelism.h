// The config's parallelism_config section (Composer's Trainer argument): {fsdp: {...}} for sharded training.
#pragma once

#include "cli/config_node.h"

#include "composer/dist/parallelism_config.h"

namespace composer::cli {

/// parallelism_config: each section of dist::for_each_parallelism_section ({fsdp: {...}}) with the keys of its
/// options' field list (docs/fsdp.md lists FSDP's). Composer's keys a section holds fixed (fixed_composer_keys) are
/// accepted at that value and are a ConfigError naming the key otherwise, as are the refused sections (`tp`), unknown
/// keys and values ParallelismConfig::validate() refuses.
dist::ParallelismConfig build_parallelism(const ConfigNode& n);

}  // namespace composer::cli
