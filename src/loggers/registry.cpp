#include "composer/loggers/registry.h"

#include "composer/loggers/console_logger.h"
#include "composer/loggers/file_logger.h"

namespace composer::loggers {

const LoggerRegistry& logger_registry() {
  static const LoggerRegistry registry(
      "logger",
      {
          registry_entry<LoggerDestination, ConsoleLogger, ConsoleLoggerOptions>("console", "ConsoleLogger",
                                                                                 "Composer's console lines"),
          registry_entry<LoggerDestination, FileLogger, FileLoggerOptions>("file", "FileLogger", "JSON lines per rank"),
      });
  return registry;
}

}  // namespace composer::loggers
