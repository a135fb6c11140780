// composer-cpp: train, evaluate and inspect Composer C++ runs from YAML configs.
#include "cli/commands.h"
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
  auto* inspect = app.add_subcommand("inspect", "Print a checkpoint's timestamp, run name, metadata, algorithms and tensors");
  inspect->add_option("checkpoint", checkpoint, "checkpoint file")->required();
  auto* exporter = app.add_subcommand("export", "Write a checkpoint's model weights for other tools");
  exporter->add_option("checkpoint", checkpoint, "checkpoint file")->required();
  exporter->add_option("--format", format, "output format (safetensors)");
  exporter->add_option("--output,-o", output, "output file (default: the checkpoint's name with .safetensors)");

  std::string kinds;
  for (const auto& k : composer::cli::registry_kinds()) kinds += (kinds.empty() ? "" : "|") + k;
  auto* list = app.add_subcommand("list", "List what is registered: " + kinds);
  list->add_option("kind", kind, kinds)->required();

  CLI11_PARSE(app, argc, argv);
  if (*train) return composer::cli::train_command(config, overrides, std::cout, std::cerr);
  if (*eval) return composer::cli::eval_command(config, overrides, std::cout, std::cerr);
  if (*inspect) return composer::cli::inspect_command(checkpoint, std::cout, std::cerr);
  if (*exporter) return composer::cli::export_command(checkpoint, format, output, std::cout, std::cerr);
  return composer::cli::list_command(kind, std::cout, std::cerr);
}
