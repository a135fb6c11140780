// How the field lists read and print the values of dist's options (dist sits below core, which owns the field
// machinery of core/fields.h): FSDPOptions' sharding_strategy and backward_prefetch by Composer's names, and
// mixed_precision as a preset name or a {param_dtype, reduce_dtype, buffer_dtype} mapping (in Hparams, the dotted
// keys "mixed_precision.param_dtype", ... that a nested YAML mapping becomes). Found by argument-dependent lookup.
#pragma once

#include "composer/core/hparams.h"
#include "composer/dist/parallelism_config.h"

#include <string>

namespace composer::dist {

std::string field_text(ShardingStrategy value);
void read_field(Hparams& h, const std::string& key, ShardingStrategy& value);
std::string field_text(BackwardPrefetch value);
void read_field(Hparams& h, const std::string& key, BackwardPrefetch& value);
/// 'DEFAULT' for a preset, {'param_dtype': 'bfloat16', ...} for explicit dtypes (unset ones left out).
std::string field_text(const FSDPMixedPrecision& value);
void read_field(Hparams& h, const std::string& key, FSDPMixedPrecision& value);

}  // namespace composer::dist
