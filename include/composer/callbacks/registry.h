// The callback registry (core/registry.h): the built-in callbacks by config name ("speed_monitor") and class name,
// with the hyperparameters of their options' field lists.
#pragma once

#include "composer/core/callback.h"
#include "composer/core/registry.h"

namespace composer::callbacks {

using CallbackRegistry = Registry<Callback>;
const CallbackRegistry& callback_registry();

}  // namespace composer::callbacks
