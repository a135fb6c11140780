// The algorithm registry (core/registry.h): every method by its config name ("blurpool") and Composer class name
// ("BlurPool"), built through its options' field list, so YAML configs, reprs in checkpoints and
// `composer-cpp list algorithms` see all of them with the defaults the options declare.
#pragma once

#include "composer/core/algorithm.h"
#include "composer/core/registry.h"

#include <map>
#include <memory>
#include <string>

namespace composer::algorithms {

using AlgorithmRegistry = Registry<Algorithm>;
using AlgorithmEntry = AlgorithmRegistry::Entry;

/// All registered algorithms.
const AlgorithmRegistry& algorithm_registry();
/// The entry for a config or class name, or nullptr.
const AlgorithmEntry* find_algorithm(const std::string& name);
/// Builds `name` (config or class name) from `hparams`; throws std::invalid_argument naming an unknown algorithm (with
/// the registered names), an unknown key or a bad value. Errors name keys as "<where>.<key>" (default: the name).
std::shared_ptr<Algorithm> make_algorithm(const std::string& name,
                                          const std::map<std::string, std::string>& hparams = {},
                                          const std::string& where = "");

/// Re-creates an algorithm from its repr, "BlurPool(replace_convs=True, min_channels=16)" (how checkpoints record
/// them). Throws std::invalid_argument naming the repr when it cannot be parsed or built.
std::shared_ptr<Algorithm> make_algorithm_from_repr(const std::string& repr);

}  // namespace composer::algorithms
