// The trace-handler registry (core/registry.h): the built-in trace handlers by config name ("json") and class name.
#pragma once

#include "composer/core/registry.h"
#include "composer/profiler/trace_handler.h"

namespace composer::profiler {

using TraceHandlerRegistry = Registry<TraceHandler>;
const TraceHandlerRegistry& trace_handler_registry();

}  // namespace composer::profiler
