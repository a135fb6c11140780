#include "cli/build_run.h"

#include "cli/registry.h"
#include "composer/callbacks/registry.h"
#include "composer/composer.h"
#include "composer/loggers/registry.h"
#include "composer/models/registry.h"
#include "composer/optim/registry.h"

#include <torch/torch.h>

namespace composer::cli {
namespace {

template <class F>
auto guard(const std::string& path, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const ConfigError&) {
    throw;
  } catch (const std::invalid_argument& e) {
    throw ConfigError(path + ": " + e.what());
  }
}

// The image shapes the data gives against what the model takes, checked here so that a mismatch names the config
// keys instead of surfacing as a matmul error in the first forward.
void check_model_fits_images(const ConfigNode& n, const std::string& name, const DataSpec& data) {
  if (data.image_size <= 0 || data.language) return;
  const std::string shape =
      std::to_string(data.channels) + "x" + std::to_string(data.image_size) + "x" + std::to_string(data.image_size);
  if (n.has("in_channels") && n.get_int("in_channels", 0) != data.channels) {
    throw ConfigError(n.key_path("in_channels") + ": " + std::to_string(n.get_int("in_channels", 0)) +
                      ", but the data gives " + shape + " images (" + std::to_string(data.channels) + " channels)");
  }
  if (name == "mlp") {
    const int64_t features = data.channels * data.image_size * data.image_size;
    if (n.has("in_features") && n.get_int("in_features", 0) != features) {
      throw ConfigError(n.key_path("in_features") + ": " + std::to_string(n.get_int("in_features", 784)) +
                        ", but the data gives " + shape + " images = " + std::to_string(features) + " features");
    }
  }
  if (name == "mnist_cnn" && (data.image_size < 28 || data.image_size > 31)) {
    throw ConfigError(n.key_path("name") +
                      ": mnist_cnn takes 28x28 images (two 2x2 poolings to 7x7), but the data gives " + shape);
  }
}

// The mapping's keys other than `name` as hyperparameter strings: scalars as written, a list of scalars as "[a, b]".
std::map<std::string, std::string> hparams_of(const ConfigNode& n) {
  std::map<std::string, std::string> hparams;
  if (!n.yaml().IsMap()) return hparams;
  for (const auto& kv : n.yaml()) {
    const std::string key = kv.first.as<std::string>();
    if (key == "name") continue;
    if (kv.second.IsScalar()) {
      hparams[key] = kv.second.Scalar();
      continue;
    }
    std::string list;
    bool scalars = kv.second.IsSequence();
    for (const auto& item : kv.second) {
      scalars = scalars && item.IsScalar();
      if (scalars) list += (list.empty() ? "" : ", ") + item.Scalar();
    }
    if (!scalars) throw ConfigError(n.key_path(key) + ": expected a scalar or a list of scalars");
    hparams[key] = "[" + list + "]";
  }
  return hparams;
}

// `- name: x` plus its hyperparameters, built by a library registry: unknown names list the registered ones, and
// key errors name the key's path.
template <class Registry, class... Context>
auto build_from(const Registry& registry, const ConfigNode& n, const std::string& name, Context&&... context) {
  if (!registry.find(name)) {
    throw ConfigError(n.key_path("name") + ": unknown " + registry.kind() + " '" + name +
                      "'; registered: " + registry.names());
  }
  const auto hparams = hparams_of(n);
  try {
    return registry.make(name, hparams, n.path(), std::forward<Context>(context)...);
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    throw ConfigError(what.rfind(n.path(), 0) == 0 ? what : n.path() + ": " + what);
  }
}

// The model's shape defaults follow the data (models::ModelInputs); explicit keys that contradict it are errors here.
std::shared_ptr<ComposerModel> build_model(const ConfigNode& n, const DataSpec& data) {
  const std::string name = n.require_string("name");
  if (models::model_registry().find(name)) check_model_fits_images(n, name, data);
  models::ModelInputs inputs;
  if (!data.language) {
    inputs.channels = data.channels;
    inputs.image_size = data.image_size;
  }
  inputs.num_classes = data.num_classes;
  inputs.vocab_size = data.vocab_size;
  return build_from(models::model_registry(), n, name, inputs);
}

std::shared_ptr<torch::optim::Optimizer> build_optimizer(const ConfigNode& n, ComposerModel& model) {
  return build_from(optim::optimizer_registry(), n, n.get_string("name", "decoupled_sgdw"), model.parameters());
}

std::shared_ptr<ComposerScheduler> build_scheduler(const ConfigNode& n) {
  return build_from(optim::scheduler_registry(), n, n.require_string("name"));
}

std::shared_ptr<Algorithm> build_algorithm(const ConfigNode& n) {
  return build_from(algorithms::algorithm_registry(), n, n.require_string("name"));
}

std::shared_ptr<Callback> build_callback(const ConfigNode& n) {
  return build_from(callbacks::callback_registry(), n, n.require_string("name"));
}

// The CLI keeps its runs in runs/: a file logger without a filename writes runs/{run_name}/logs-rank{rank}.jsonl.
std::shared_ptr<LoggerDestination> build_logger(const ConfigNode& n, RunSpec& spec) {
  const std::string name = n.require_string("name");
  YAML::Node node = YAML::Clone(n.yaml());
  if (name == "file" && !node["filename"]) node["filename"] = "runs/{run_name}/logs-rank{rank}.jsonl";
  if (name == "file") spec.log_file_patterns.push_back(node["filename"].as<std::string>());
  return build_from(loggers::logger_registry(), ConfigNode(node, n.path()), name);
}

}  // namespace

RunSpec build_run(const YAML::Node& root_yaml, bool need_train_data) {
  const ConfigNode root(root_yaml, "");
  root.expect_keys({"run_name",
                    "seed",
                    "model",
                    "train_data",
                    "eval_data",
                    "optimizer",
                    "schedulers",
                    "algorithms",
                    "callbacks",
                    "loggers",
                    "max_duration",
                    "iteration_length",
                    "eval_interval",
                    "eval_subset_num_batches",
                    "train_subset_num_batches",
                    "precision",
                    "device",
                    "device_train_microbatch_size",
                    "scale_schedule_ratio",
                    "step_schedulers_every_batch",
                    "progress_bar",
                    "log_to_console",
                    "console_log_interval",
                    "deterministic_mode",
                    "num_threads",
                    "save_folder",
                    "save_filename",
                    "save_latest_filename",
                    "save_interval",
                    "save_overwrite",
                    "save_weights_only",
                    "save_num_checkpoints_to_keep",
                    "load_path",
                    "load_weights_only",
                    "load_strict_model_weights",
                    "load_ignore_keys",
                    "autoresume"});
  RunSpec spec;
  const auto seed = static_cast<uint64_t>(ConfigNode::positive(root.get_int("seed", 42), "seed", /*allow_zero=*/true));
  seed_all(seed);  // before the model is built: the same seed gives the same initial weights
  if (!root.has("model")) throw ConfigError("model: required (a mapping with a 'name')");
  if (root.has("train_data")) {
    spec.train = build_data(root.child("train_data"), /*train=*/true, seed);
  } else if (need_train_data) {
    throw ConfigError("train_data: required to train (a mapping with a 'dataset')");
  }
  if (root.has("eval_data")) spec.eval = build_data(root.child("eval_data"), /*train=*/false, seed);
  const DataSpec& shape_source = spec.train.loader ? spec.train : spec.eval;
  auto model = build_model(root.child("model"), shape_source);
  spec.options = std::make_unique<TrainerOptions>(model);
  TrainerOptions& o = *spec.options;
  o.seed(seed).run_name(root.get_string("run_name", "")).train_dataloader(spec.train.loader);
  if (spec.eval.loader) o.eval_dataloader(spec.eval.loader);
  if (auto d = root.get_time("max_duration", TimeUnit::EPOCH)) o.max_duration(*d);
  if (auto il = root.get_time("iteration_length", TimeUnit::EPOCH)) o.iteration_length(*il);
  if (need_train_data && !o.max_duration())
    throw ConfigError("max_duration: required to train (e.g. '2ep' or '500ba')");
  if (auto e = root.get_time("eval_interval", TimeUnit::EPOCH)) o.eval_interval(*e);
  if (auto c = root.get_time("console_log_interval", TimeUnit::BATCH)) o.console_log_interval(*c);
  o.eval_subset_num_batches(root.get_int("eval_subset_num_batches", -1))
      .train_subset_num_batches(root.get_int("train_subset_num_batches", -1))
      .device(root.get_string("device", ""))
      .scale_schedule_ratio(root.get_double("scale_schedule_ratio", 1.0))
      .step_schedulers_every_batch(root.get_bool("step_schedulers_every_batch", true))
      .progress_bar(root.get_bool("progress_bar", true))
      .log_to_console(root.get_bool("log_to_console", false))
      .deterministic_mode(root.get_bool("deterministic_mode", false))
      .num_threads(static_cast<int>(root.get_int("num_threads", 0)));
  if (root.has("precision"))
    o.precision(guard("precision", [&] { return parse_precision(root.get_string("precision", "")); }));
  if (root.has("device_train_microbatch_size")) {
    o.device_train_microbatch_size(guard("device_train_microbatch_size", [&] {
      return MicrobatchSize::parse(root.get_string("device_train_microbatch_size", ""));
    }));
  }
  o.optimizer(build_optimizer(root.child("optimizer"), *model));
  std::vector<std::shared_ptr<ComposerScheduler>> schedulers;
  for (const auto& s : root.children("schedulers")) schedulers.push_back(build_scheduler(s));
  o.schedulers(schedulers);
  std::vector<std::shared_ptr<Algorithm>> algorithms;
  for (const auto& a : root.children("algorithms")) algorithms.push_back(build_algorithm(a));
  o.algorithms(algorithms);
  std::vector<std::shared_ptr<Callback>> callbacks;
  for (const auto& c : root.children("callbacks")) callbacks.push_back(build_callback(c));
  o.callbacks(callbacks);
  std::vector<std::shared_ptr<LoggerDestination>> loggers;
  for (const auto& l : root.children("loggers")) loggers.push_back(build_logger(l, spec));
  o.loggers(loggers);
  o.save_folder(root.get_string("save_folder", ""))
      .save_filename(root.get_string("save_filename", o.save_filename()))
      .save_latest_filename(root.get_string("save_latest_filename", o.save_latest_filename()))
      .save_overwrite(root.get_bool("save_overwrite", false))
      .save_weights_only(root.get_bool("save_weights_only", false))
      .save_num_checkpoints_to_keep(root.get_int("save_num_checkpoints_to_keep", -1))
      .load_path(root.get_string("load_path", ""))
      .load_weights_only(root.get_bool("load_weights_only", false))
      .load_strict_model_weights(root.get_bool("load_strict_model_weights", true))
      .autoresume(root.get_bool("autoresume", false));
  if (auto si = root.get_time("save_interval", TimeUnit::EPOCH)) o.save_interval(*si);
  if (root.has("load_ignore_keys")) {
    const YAML::Node keys = root.yaml()["load_ignore_keys"];
    if (!keys.IsSequence()) throw ConfigError("load_ignore_keys: expected a list of glob patterns");
    std::vector<std::string> globs;
    for (const auto& k : keys) globs.push_back(k.as<std::string>());
    o.load_ignore_keys(globs);
  }
  if (o.save_folder().empty() && (o.autoresume() || root.has("save_interval"))) {
    throw ConfigError(std::string(o.autoresume() ? "autoresume" : "save_interval") + ": needs save_folder");
  }
  guard("config", [&] {
    o.validate();
    return 0;
  });
  return spec;
}

}  // namespace composer::cli
