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
/// Writes a checkpoint's model weights for other tools: `format` "safetensors" (one file), or "hf" (a Hugging Face
/// model directory of a Llama-family model, which `config` names).
int export_command(const std::string& checkpoint, const std::string& format, const std::string& output,
                   const std::string& config, std::ostream& out, std::ostream& err);
/// export --format hf.
int export_hf(const std::string& checkpoint, const std::string& config, const std::string& output, std::ostream& out);

struct GenerateArgs {
  std::string prompt;
  int64_t max_new_tokens = 64;
  bool sample = false;
  double temperature = 1.0;
  int64_t top_k = 50;
  double top_p = 1.0;
  int64_t seed = 0;
};
/// Prints the prompt and its continuation by the config's language model (load_path: a fine-tuned checkpoint's
/// weights): greedy, or sampled with --sample.
int generate_command(const std::string& config, const std::vector<std::string>& overrides, const GenerateArgs& args,
                     std::ostream& out, std::ostream& err);
/// Lists what is registered under `kind`, one line each.
int list_command(const std::string& kind, std::ostream& out, std::ostream& err);
/// composer-cpp convert CONFIG OUT: writes the config's train_data (or, with split "test", its eval_data) as MDS
/// shards (data/mds_writer.h) that MosaicML Streaming and StreamingDataset read, before any transform.
int convert_command(const std::string& config, const std::string& out_dir, const std::string& split,
                    const std::string& compression, std::ostream& out, std::ostream& err);

}  // namespace composer::cli
