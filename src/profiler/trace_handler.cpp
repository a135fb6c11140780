#include "composer/profiler/trace_handler.h"

#include <stdexcept>

namespace composer {

const Profiler& TraceHandler::profiler() const {
  if (!profiler_) {
    throw std::logic_error(name() +
                           ": no profiler; give the Trainer a profiler (TrainerOptions::profiler) with this "
                           "handler among its trace_handlers");
  }
  return *profiler_;
}

}  // namespace composer
