// The logger registry (core/registry.h): the logger destinations a config can name ("file", "console"), with the
// hyperparameters of their options' field lists.
#pragma once

#include "composer/core/logger.h"
#include "composer/core/registry.h"

namespace composer::loggers {

using LoggerRegistry = Registry<LoggerDestination>;
const LoggerRegistry& logger_registry();

}  // namespace composer::loggers
