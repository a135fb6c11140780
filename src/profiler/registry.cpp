#include "composer/profiler/registry.h"

#include "composer/profiler/json_trace_handler.h"

namespace composer::profiler {

const TraceHandlerRegistry& trace_handler_registry() {
  static const TraceHandlerRegistry registry(
      "trace handler",
      {
          registry_entry<TraceHandler, JsonTraceHandler, JsonTraceHandlerOptions>(
              "json", "JSONTraceHandler", "Chrome JSON traces, one per active window, and the node's merged trace"),
      });
  return registry;
}

}  // namespace composer::profiler
