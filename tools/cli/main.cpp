// composer-cpp: train, evaluate and inspect Composer C++ runs from YAML configs.
#include "cli/commands.h"
#include "cli/launch.h"
#include "cli/registry.h"

#include <CLI/CLI.hpp>

#include <iostream>

int main(int argc, char** argv) {
  CLI::App app{"composer-cpp: train models with Composer C++ from a YAML config"};
  app.require_subcommand(1);

  std::string config, kind;
  std::vector<std::string> overrides;
  auto* train = app.add_subcommand("train", "Train from CONFIG.yaml; KEY.PATH=VALUE arguments override the config");
  train->add_option("config", config, "YAML config file")->required();
  train->add_option("overrides", overrides, "dotted overrides, e.g. max_duration=1ep train_data.batch_size=64");

  auto* eval = app.add_subcommand("eval", "Evaluate the state file in load_path on eval_data");
  eval->add_option("config", config, "YAML config file")->required();
  eval->add_option("overrides", overrides, "dotted overrides, e.g. load_path=runs/x/final.pt");

  std::string checkpoint, format = "safetensors", output;
  auto* inspect =
      app.add_subcommand("inspect", "Print a checkpoint's timestamp, run name, metadata, algorithms and tensors");
  inspect->add_option("checkpoint", checkpoint, "checkpoint file")->required();
  auto* exporter = app.add_subcommand("export", "Write a checkpoint's model weights for other tools");
  exporter->add_option("checkpoint", checkpoint, "checkpoint file")->required();
  std::string export_config;
  exporter->add_option("--format", format,
                       "output format: safetensors (a file) or hf (a Hugging Face model directory)");
  exporter->add_option("--output,-o", output,
                       "output file (default: the checkpoint's name with .safetensors) or, for hf, directory");
  exporter->add_option("--config", export_config, "hf: the run's YAML config, which names the model");

  composer::cli::GenerateArgs gen;
  auto* generate = app.add_subcommand("generate", "Continue --prompt with CONFIG's language model (greedy by default)");
  generate->add_option("config", config, "YAML config file (model:, and load_path for a fine-tuned checkpoint)")
      ->required();
  generate->add_option("overrides", overrides, "dotted overrides, e.g. load_path=runs/x/final.pt");
  generate->add_option("--prompt,-p", gen.prompt, "the text to continue")->required();
  generate->add_option("--max-new-tokens", gen.max_new_tokens, "tokens to generate (default 64)");
  generate->add_flag("--sample", gen.sample, "sample instead of greedy decoding");
  generate->add_option("--temperature", gen.temperature, "sampling temperature (default 1.0)");
  generate->add_option("--top-k", gen.top_k, "sampling keeps the k most likely tokens (default 50; 0: all)");
  generate->add_option("--top-p", gen.top_p, "sampling keeps the most likely tokens up to this probability");
  generate->add_option("--seed", gen.seed, "seed of the sampling");

  std::string out_dir, split = "train", compression;
  auto* convert = app.add_subcommand("convert", "Write a config's train_data (or eval_data) as MDS shards");
  convert->add_option("config", config, "YAML config file")->required();
  convert->add_option("out", out_dir, "output folder (must not hold an index.json)")->required();
  convert->add_option("--split", split, "train (train_data) or test (eval_data)");
  convert->add_option("--compression", compression, "none (default) or zstd[:level]");

  composer::cli::LaunchOptions lo;
  auto* launch = app.add_subcommand(
      "launch", "Start N ranks: composer-cpp launch -n N [options] -- PROGRAM ARGS... (or: train CONFIG)");
  launch->add_option("-n,--nproc", lo.nproc, "ranks on this node")->required();
  launch->add_option("--nnodes", lo.nnodes, "number of nodes");
  launch->add_option("--node-rank", lo.node_rank, "this node's rank");
  launch->add_option("--master-addr", lo.master_addr, "address of rank 0");
  launch->add_option("--node-addr", lo.node_addr,
                     "this node's address for the ranks' connections (default: the host name's)");
  launch->add_option("--master-port", lo.master_port, "port of rank 0's store (default: a free port)");
  launch->add_option("--grace", lo.grace_seconds, "seconds between SIGTERM and SIGKILL when a rank fails");
  launch->add_option("command", lo.command, "the program and its arguments (after --), or: train CONFIG ...");

  std::string kinds;
  for (const auto& k : composer::cli::registry_kinds()) kinds += (kinds.empty() ? "" : "|") + k;
  auto* list = app.add_subcommand("list", "List what is registered: " + kinds);
  list->add_option("kind", kind, kinds)->required();

  CLI11_PARSE(app, argc, argv);
  if (*train) return composer::cli::train_command(config, overrides, std::cout, std::cerr);
  if (*eval) return composer::cli::eval_command(config, overrides, std::cout, std::cerr);
  if (*launch) {
    return composer::cli::launch_command(lo, std::cout, std::cerr);
  }
  if (*convert) return composer::cli::convert_command(config, out_dir, split, compression, std::cout, std::cerr);
  if (*inspect) return composer::cli::inspect_command(checkpoint, std::cout, std::cerr);
  if (*exporter) return composer::cli::export_command(checkpoint, format, output, export_config, std::cout, std::cerr);
  if (*generate) return composer::cli::generate_command(config, overrides, gen, std::cout, std::cerr);
  return composer::cli::list_command(kind, std::cout, std::cerr);
}
