// How the field lists read and print the values of dist's options (dist sits below core, which owns the field
// machinery of core/fields.h): FSDPOptions' sharding_strategy and backward_prefetch by Composer's names, and
// mixed_precision as a preset name or a {param_dtype, reduce_dtype, buffer_dtype} mapping (in Hparams, the dotted
// keys "mixed_precision.param_dtype", ... that a nested YAML mapping becomes). Found by argument-dependent lookup.
// Also the sections of parallelism_config that a config reader (the CLI) builds, so that adding a strategy's section
// is a line here and in dist/, and the reader names none.
#pragma once

#include "composer/core/hparams.h"
#include "composer/dist/parallelism_config.h"

#include <map>
#include <string>
#include <vector>

namespace composer::dist {

std::string field_text(ShardingStrategy value);
void read_field(Hparams& h, const std::string& key, ShardingStrategy& value);
std::string field_text(BackwardPrefetch value);
void read_field(Hparams& h, const std::string& key, BackwardPrefetch& value);
/// 'DEFAULT' for a preset, {'param_dtype': 'bfloat16', ...} for explicit dtypes (unset ones left out).
std::string field_text(const FSDPMixedPrecision& value);
void read_field(Hparams& h, const std::string& key, FSDPMixedPrecision& value);
/// The keys of mixed_precision's mapping form.
std::vector<std::string> nested_keys(const FSDPMixedPrecision&);

/// The sections of parallelism_config, each an optional options struct read through its field list:
/// visit(key, std::optional<Options>&).
template <class Visit>
void for_each_parallelism_section(ParallelismConfig& config, Visit&& visit) {
  visit("fsdp", config.fsdp());
  visit("tp", config.tp());
}
/// Composer's sections this build refuses, each with the reason (none at present).
const std::map<std::string, std::string>& refused_parallelism_sections();
/// Composer's keys of a section that the engine holds at one value, with that value (lower case): a config may give
/// them only that value. FSDP's: backward_prefetch_limit 1, cpu_offload false, use_orig_params true, ...
const std::map<std::string, std::string>& fixed_composer_keys(const FSDPOptions&);
/// None for tp (its layer_plan is set in code, as in Composer).
const std::map<std::string, std::string>& fixed_composer_keys(const TPOptions&);

}  // namespace composer::dist
