#include "composer/loggers/registry.h"

#include "composer/loggers/console_logger.h"
#include "composer/loggers/file_logger.h"
#include "composer/loggers/remote_uploader_downloader.h"
#if COMPOSER_WITH_MLFLOW
#include "composer/loggers/mlflow_logger.h"
#endif
#if COMPOSER_WITH_TENSORBOARD
#include "composer/loggers/tensorboard_logger.h"
#endif

namespace composer::loggers {

const LoggerRegistry& logger_registry() {
  static const LoggerRegistry registry("logger", {
    registry_entry<LoggerDestination, ConsoleLogger, ConsoleLoggerOptions>("console", "ConsoleLogger",
                                                                           "Composer's console lines"),
        registry_entry<LoggerDestination, FileLogger, FileLoggerOptions>("file", "FileLogger", "JSON lines per rank"),
        registry_entry<LoggerDestination, RemoteUploaderDownloader, RemoteUploaderDownloaderOptions>(
            "remote_uploader_downloader", "RemoteUploaderDownloader",
            "uploads logged files (checkpoints, logs, traces) to an object store"),
#if COMPOSER_WITH_MLFLOW
        registry_entry<LoggerDestination, MLFlowLogger, MLFlowLoggerOptions>(
            "mlflow", "MLFlowLogger", "an MLflow tracking server: metrics, params, tags, artifacts"),
#endif
#if COMPOSER_WITH_TENSORBOARD
        registry_entry<LoggerDestination, TensorboardLogger, TensorboardLoggerOptions>(
            "tensorboard", "TensorboardLogger", "TensorBoard event files: scalars, hparams, images, tables"),
#endif
  });
  return registry;
}

}  // namespace composer::loggers
