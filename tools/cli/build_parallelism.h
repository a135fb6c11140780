// The config's parallelism_config section (Composer's Trainer argument): {fsdp: {...}} for sharded training.
#pragma once

#include "cli/config_node.h"

#include "composer/dist/parallelism_config.h"

namespace composer::cli {

/// parallelism_config: {fsdp: {...}} with the keys of FSDPOptions' field list (docs/fsdp.md lists them). Composer's
/// other FSDP keys are accepted at Composer's default value (what the engine does) and are a ConfigError naming the
/// key otherwise, as are `tp`, unknown keys and values ParallelismConfig::validate() refuses.
dist::ParallelismConfig build_parallelism(const ConfigNode& n);

}  // namespace composer::cli
