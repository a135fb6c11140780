// The composer-cpp subcommands. Each returns the process exit code: 0 ok, 1 a run failed, 2 a bad config.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace composer::cli {

/// Trains from CONFIG with KEY=VALUE overrides; prints where the logs and final state went.
int train_command(const std::string& config, const std::vector<std::string>& overrides, std::ostream& out,
                  std::ostream& err);
/// Evaluates `load_path` (a state file) on eval_data.
int eval_command(const std::string& config, const std::vector<std::string>& overrides, std::ostream& out,
                 std::ostream& err);
/// Prints a checkpoint's run name, timestamp, metadata, algorithms, and tensor names, shapes and dtypes.
int inspect_command(const std::string& checkpoint, std::ostream& out, std::ostream& err);
/// Writes a checkpoint's model weights for other tools; `format` must be "safetensors".
int export_command(const std::string& checkpoint, const std::string& format, const std::string& output,
                   std::ostream& out, std::ostream& err);
/// Lists what is registered under `kind`, one line each.
int list_command(const std::string& kind, std::ostream& out, std::ostream& err);
/// composer-cpp convert CONFIG OUT: writes the config's train_data (or, with split "test", its eval_data) as MDS
/// shards (data/mds_writer.h) that MosaicML Streaming and StreamingDataset read, before any transform.
int convert_command(const std::string& config, const std::string& out_dir, const std::string& split,
                    const std::string& compression, std::ostream& out, std::ostream& err);

}  // namespace composer::cli
